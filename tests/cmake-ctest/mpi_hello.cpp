// mpi_hello.cpp - built by tests/cmake-ctest/CMakeLists.txt through
// find_package(MPI COMPONENTS CXX). Every rank's rank is gathered on every
// rank; rank 0 checks them and prints "PASS cmake_hello_cxx".
#include <mpi.h>

#include <iostream>
#include <numeric>
#include <vector>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, size = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    std::vector<int> all(static_cast<size_t>(size), -1);
    MPI_Allgather(&rank, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD);
    std::vector<int> want(all.size());
    std::iota(want.begin(), want.end(), 0);
    if (rank == 0) {
        if (all == want)
            std::cout << "PASS cmake_hello_cxx (" << size << " ranks)\n";
        else
            std::cout << "cmake_hello_cxx: FAIL\n";
    }
    MPI_Finalize();
    return all == want ? 0 : 1;
}
