! use_mpi_f08.f90 - the `mpi_f08` module: handle types with == and /=,
! optional ierror, MPI_Status as a type, error classes returned under
! MPI_ERRORS_RETURN, MPI_Waitsome's 1-based indices, nonblocking
! collectives and a subarray datatype. Prints one OK line per part from
! rank 0; any mismatch ends the job with MPI_Abort.
module handlers
  use mpi_f08
  implicit none
  integer :: seen_code = MPI_SUCCESS
contains
  subroutine remember(comm, code)
    type(MPI_Comm) :: comm
    integer :: code
    seen_code = code
  end subroutine remember
end module handlers

program use_mpi_f08
  use mpi_f08
  use handlers
  implicit none
  type(MPI_Comm) :: spawned
  character(len=8) :: spawn_args(2)
  integer :: spawn_codes(2)
  integer :: rank, nprocs, i, n, ierr, cls, outcount, indices(4)
  type(MPI_Comm) :: dup, node
  type(MPI_Request) :: reqs(4)
  type(MPI_Status) :: st, sts(4)
  type(MPI_Datatype) :: sub
  type(MPI_Errhandler) :: eh
  integer :: a(4), b(4), grid(4, 3), row(3)
  character(len=MPI_MAX_LIBRARY_VERSION_STRING) :: version

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs)

  ! Handles and statuses as types.
  call MPI_Comm_dup(MPI_COMM_WORLD, dup)
  call need(dup /= MPI_COMM_WORLD .and. dup /= MPI_COMM_NULL, 'dup handle')
  a = [(rank * 10 + i, i = 1, 4)]
  call MPI_Sendrecv(a, 4, MPI_INTEGER, mod(rank + 1, nprocs), 5, b, 4, MPI_INTEGER, &
                    MPI_ANY_SOURCE, MPI_ANY_TAG, dup, st)
  call need(st%MPI_SOURCE == mod(rank + nprocs - 1, nprocs) .and. st%MPI_TAG == 5, 'status fields')
  call MPI_Get_count(st, MPI_INTEGER, n)
  call need(n == 4 .and. b(4) == st%MPI_SOURCE * 10 + 4, 'sendrecv data')
  call MPI_Comm_free(dup)
  call need(dup == MPI_COMM_NULL, 'comm freed')
  if (rank == 0) print '(a)', 'OK handles'

  ! Errors come back as codes when asked, with ierror given.
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)
  call MPI_Send(a, 1, MPI_INTEGER, nprocs + 5, 0, MPI_COMM_WORLD, ierr)
  call need(ierr /= MPI_SUCCESS, 'bad rank refused')
  call MPI_Error_class(ierr, cls)
  call need(cls == MPI_ERR_RANK, 'MPI_ERR_RANK')
  call MPI_Send(a, -1, MPI_INTEGER, 0, 0, MPI_COMM_WORLD, ierr)
  call MPI_Error_class(ierr, cls)
  call need(cls == MPI_ERR_COUNT, 'MPI_ERR_COUNT')
  ! An error handler written in Fortran sees the code.
  call MPI_Comm_create_errhandler(remember, eh)
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh)
  call MPI_Errhandler_free(eh)
  call MPI_Send(a, 1, MPI_INTEGER, nprocs + 5, 0, MPI_COMM_WORLD, ierr)
  call MPI_Error_class(seen_code, cls)
  call need(cls == MPI_ERR_RANK, 'Fortran error handler')
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL)
  if (rank == 0) print '(a)', 'OK errors'

  ! MPI_Waitsome: indices count from 1.
  reqs(1) = MPI_REQUEST_NULL
  call MPI_Irecv(b(1), 1, MPI_INTEGER, rank, 7, MPI_COMM_WORLD, reqs(2))
  reqs(3) = MPI_REQUEST_NULL
  call MPI_Isend(a(1), 1, MPI_INTEGER, rank, 7, MPI_COMM_WORLD, reqs(4))
  n = 0
  do while (n < 2)
    call MPI_Waitsome(4, reqs, outcount, indices, sts)
    call need(outcount /= MPI_UNDEFINED, 'waitsome found requests')
    do i = 1, outcount
      call need(indices(i) == 2 .or. indices(i) == 4, 'waitsome index')
    end do
    n = n + outcount
  end do
  call need(b(1) == a(1), 'self message')
  call MPI_Waitsome(4, reqs, outcount, indices, MPI_STATUSES_IGNORE)
  call need(outcount == MPI_UNDEFINED, 'waitsome none left')

  ! A nonblocking collective, with MPI_STATUS_IGNORE.
  call MPI_Iallreduce(rank, n, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, reqs(1))
  call MPI_Wait(reqs(1), MPI_STATUS_IGNORE)
  call need(n == nprocs * (nprocs - 1) / 2, 'iallreduce')
  if (rank == 0) print '(a)', 'OK requests'

  ! A row of a column-major grid as a subarray.
  grid = reshape([(i, i = 1, 12)], [4, 3])
  call MPI_Type_create_subarray(2, [4, 3], [1, 3], [2, 0], MPI_ORDER_FORTRAN, MPI_INTEGER, sub)
  call MPI_Type_commit(sub)
  call MPI_Sendrecv(grid, 1, sub, rank, 3, row, 3, MPI_INTEGER, rank, 3, MPI_COMM_WORLD, &
                    MPI_STATUS_IGNORE)
  call need(all(row == [3, 7, 11]), 'subarray row')
  call MPI_Type_free(sub)
  call MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, node)
  call MPI_Comm_size(node, n)
  call need(n >= 1 .and. n <= nprocs, 'split_type')
  call MPI_Comm_free(node)
  call MPI_Get_library_version(version, n)
  call need(index(version, 'Tandem') > 0 .and. n > 0, 'library version')
  if (rank == 0) print '(a)', 'OK datatypes'

  ! Constants of a kind other than the default INTEGER's.
  call need(MPI_DISPLACEMENT_CURRENT == -1 .and. &
       kind(MPI_DISPLACEMENT_CURRENT) == MPI_OFFSET_KIND, 'MPI_DISPLACEMENT_CURRENT')
  if (rank == 0) print '(a)', 'OK constants'
  ! MPI_SIZEOF: bytes in one element, for scalars and arrays alike.
  call sizes()
  if (rank == 0) print '(a)', 'OK sizeof'

  ! MPI_Comm_spawn takes MPI_ARGV_NULL and an argument list, and fails with
  ! MPI_ERR_SPAWN (every process starts with tandem run).
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)
  call MPI_Comm_spawn('child', MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &
       spawned, MPI_ERRCODES_IGNORE, ierr)
  call MPI_Error_class(ierr, n)
  call need(n == MPI_ERR_SPAWN .and. spawned == MPI_COMM_NULL, 'spawn')
  spawn_args(1) = '-v'
  spawn_args(2) = ' '
  call MPI_Comm_spawn('child', spawn_args, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &
       spawned, spawn_codes, ierr)
  call MPI_Error_class(ierr, n)
  call need(n == MPI_ERR_SPAWN .and. all(spawn_codes == MPI_ERR_SPAWN), 'spawn with argv')
  call MPI_Comm_spawn_multiple(2, spawn_args, MPI_ARGVS_NULL, [1, 1], &
       [MPI_INFO_NULL, MPI_INFO_NULL], 0, MPI_COMM_WORLD, spawned, MPI_ERRCODES_IGNORE, ierr)
  call MPI_Error_class(ierr, n)
  call need(n == MPI_ERR_SPAWN, 'spawn_multiple')
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL)
  if (rank == 0) print '(a)', 'OK spawn'
  call MPI_Finalize()

contains
  subroutine need(cond, what)
    logical, intent(in) :: cond
    character(len=*), intent(in) :: what
    if (.not. cond) then
      print '(2a)', 'FAILED: ', what
      call MPI_Abort(MPI_COMM_WORLD, 1)
    end if
  end subroutine need
  subroutine sizes()
    integer(kind=1) :: i1
    integer(kind=2) :: i2(3)
    integer :: i4
    integer(kind=8) :: i8(2, 2)
    real :: r4
    double precision :: r8(5)
    complex :: c4
    complex(kind=8) :: c8(2)
    logical :: l4
    logical(kind=1) :: l1
    character(len=7) :: ch
    integer :: n, ierr
    call MPI_Sizeof(i1, n); call need(n == 1, 'sizeof integer(1)')
    call MPI_Sizeof(i2, n); call need(n == 2, 'sizeof integer(2) array')
    call MPI_Sizeof(i4, n); call need(n == 4, 'sizeof integer')
    call MPI_Sizeof(i8, n); call need(n == 8, 'sizeof integer(8) 2-d array')
    call MPI_Sizeof(r4, n); call need(n == 4, 'sizeof real')
    call MPI_Sizeof(r8, n); call need(n == 8, 'sizeof double precision array')
    call MPI_Sizeof(c4, n); call need(n == 8, 'sizeof complex')
    call MPI_Sizeof(c8, n); call need(n == 16, 'sizeof complex(8) array')
    call MPI_Sizeof(l4, n); call need(n == 4, 'sizeof logical')
    call MPI_Sizeof(l1, n); call need(n == 1, 'sizeof logical(1)')
    call MPI_Sizeof(ch, n); call need(n == 1, 'sizeof character')
    n = -1; call MPI_Sizeof(r8(1), n, ierr); call need(n == 8 .and. ierr == MPI_SUCCESS, "sizeof ierror")
  end subroutine sizes
end program use_mpi_f08
