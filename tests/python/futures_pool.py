"""mpi4py.futures under Tandem: a pool of 4 spawned workers maps a function.

Run as `tandem run -n 1 python futures_pool.py` (scripts/mpi4py-tests.sh
does). Prints "PASS futures_pool" when every result is right and every task
ran in a spawned worker.
"""
from mpi4py import MPI
from mpi4py.futures import MPIPoolExecutor


def work(x):
    parent = MPI.Comm.Get_parent()
    return x * x, MPI.COMM_WORLD.Get_rank(), parent != MPI.COMM_NULL


if __name__ == "__main__":
    with MPIPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(work, range(1000), chunksize=7))
    assert [r[0] for r in results] == [x * x for x in range(1000)], "wrong results"
    assert all(r[2] for r in results), "a task ran outside a spawned worker"
    assert {r[1] for r in results} <= {0, 1, 2, 3}, "a worker outside the pool of 4"
    print("PASS futures_pool")
