! use_mpi.f90 - the `mpi` module: derived datatypes, communicators and
! their names, attributes, one-sided communication, a user-defined
! reduction, MPI_ALLTOALLW and info objects. Prints one OK line per part
! from rank 0; any mismatch ends the job with MPI_ABORT.
module checks
  use mpi
  implicit none
  integer :: deletions = 0
contains
  subroutine need(cond, what)
    logical, intent(in) :: cond
    character(len=*), intent(in) :: what
    integer :: ierr
    if (.not. cond) then
      print '(2a)', 'FAILED: ', what
      call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
    end if
  end subroutine need

  subroutine absmax(invec, inoutvec, len, datatype)
    integer :: len, datatype, i
    double precision :: invec(len), inoutvec(len)
    do i = 1, len
      inoutvec(i) = max(abs(invec(i)), abs(inoutvec(i)))
    end do
  end subroutine absmax
  subroutine copy_plus_one(oldcomm, keyval, extra, valin, valout, flag, ierr)
    integer :: oldcomm, keyval, ierr
    integer(kind=MPI_ADDRESS_KIND) :: extra, valin, valout
    logical :: flag
    valout = valin + extra
    flag = .true.
    ierr = MPI_SUCCESS
  end subroutine copy_plus_one

  subroutine count_deletion(comm, keyval, val, extra, ierr)
    integer :: comm, keyval, ierr
    integer(kind=MPI_ADDRESS_KIND) :: val, extra
    deletions = deletions + 1
    ierr = MPI_SUCCESS
  end subroutine count_deletion
  subroutine sizes(ierr)
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
    call MPI_Sizeof(i1, n, ierr); call need(n == 1, 'sizeof integer(1)')
    call MPI_Sizeof(i2, n, ierr); call need(n == 2, 'sizeof integer(2) array')
    call MPI_Sizeof(i4, n, ierr); call need(n == 4, 'sizeof integer')
    call MPI_Sizeof(i8, n, ierr); call need(n == 8, 'sizeof integer(8) 2-d array')
    call MPI_Sizeof(r4, n, ierr); call need(n == 4, 'sizeof real')
    call MPI_Sizeof(r8, n, ierr); call need(n == 8, 'sizeof double precision array')
    call MPI_Sizeof(c4, n, ierr); call need(n == 8, 'sizeof complex')
    call MPI_Sizeof(c8, n, ierr); call need(n == 16, 'sizeof complex(8) array')
    call MPI_Sizeof(l4, n, ierr); call need(n == 4, 'sizeof logical')
    call MPI_Sizeof(l1, n, ierr); call need(n == 1, 'sizeof logical(1)')
    call MPI_Sizeof(ch, n, ierr); call need(n == 1, 'sizeof character')
    call need(ierr == MPI_SUCCESS, "sizeof ierror")
  end subroutine sizes
end module checks

program use_mpi
  use mpi
  use checks
  implicit none
  integer :: spawned
  character(len=8) :: spawn_args(2)
  integer :: spawn_codes(2)
  integer :: ierr, rank, nprocs, i, n, vec, str, newcomm, res, win, op, info
  integer :: blens(2), types(2), counts(8), displs(8), ttypes(8)
  integer(kind=MPI_ADDRESS_KIND) :: disps(2), base, lb, extent, tagub, winsize, attr
  integer :: key1, key2, key3, dupcomm
  integer :: a(20), b(20), st(MPI_STATUS_SIZE)
  double precision :: d(4), e(4)
  logical :: flag
  character(len=MPI_MAX_OBJECT_NAME) :: cname
  character(len=MPI_MAX_INFO_VAL) :: val
  type pair
    sequence
    integer :: i
    double precision :: x
  end type pair
  type(pair) :: p(2)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)

  ! Derived datatypes: a strided vector and a struct built from addresses.
  call MPI_Type_vector(5, 1, 4, MPI_INTEGER, vec, ierr)
  call MPI_Type_commit(vec, ierr)
  call MPI_Type_get_extent(vec, lb, extent, ierr)
  call need(extent == 17 * 4, 'vector extent')
  a = [(i, i = 1, 20)]
  b = 0
  call MPI_Sendrecv(a, 1, vec, rank, 1, b, 5, MPI_INTEGER, rank, 1, MPI_COMM_WORLD, st, ierr)
  call need(all(b(1:5) == [1, 5, 9, 13, 17]), 'vector data')
  call MPI_Type_free(vec, ierr)
  call need(vec == MPI_DATATYPE_NULL, 'type freed')
  call MPI_Get_address(p(1)%i, disps(1), ierr)
  call MPI_Get_address(p(1)%x, disps(2), ierr)
  call MPI_Get_address(p(1), base, ierr)
  disps = disps - base
  blens = 1
  types = [MPI_INTEGER, MPI_DOUBLE_PRECISION]
  call MPI_Type_create_struct(2, blens, disps, types, str, ierr)
  call MPI_Type_commit(str, ierr)
  if (rank == 0) then
    p(1) = pair(7, 2.5d0)
    p(2) = pair(8, 3.5d0)
  end if
  call MPI_Bcast(p, 2, str, 0, MPI_COMM_WORLD, ierr)
  call need(p(2)%i == 8 .and. p(2)%x == 3.5d0 .and. p(1)%x == 2.5d0, 'struct bcast')
  call MPI_Type_free(str, ierr)
  if (rank == 0) print '(a)', 'OK datatypes'

  ! Communicators: split, compare, names, attributes.
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), -rank, newcomm, ierr)
  call MPI_Comm_size(newcomm, n, ierr)
  call need(n == (nprocs + 1 - mod(rank, 2)) / 2, 'split size')
  call MPI_Comm_compare(newcomm, MPI_COMM_WORLD, res, ierr)
  call need(res == MPI_UNEQUAL .or. (nprocs == 1), 'compare')
  call MPI_Comm_set_name(newcomm, 'halves   ', ierr)
  call MPI_Comm_get_name(newcomm, cname, n, ierr)
  call need(cname == 'halves' .and. n == 6, 'comm name')
  call MPI_Comm_free(newcomm, ierr)
  call need(newcomm == MPI_COMM_NULL, 'comm freed')
  call MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, tagub, flag, ierr)
  call need(flag .and. tagub >= 32767, 'tag_ub')
  ! Attribute callbacks in Fortran, and the predefined ones.
  call MPI_Comm_create_keyval(copy_plus_one, count_deletion, key1, 5_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, key2, &
                              0_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, key3, &
                              0_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_dup(MPI_COMM_WORLD, newcomm, ierr)
  call MPI_Comm_set_attr(newcomm, key1, 100_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_set_attr(newcomm, key2, 200_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_set_attr(newcomm, key3, 300_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_dup(newcomm, dupcomm, ierr)
  call MPI_Comm_get_attr(dupcomm, key1, attr, flag, ierr)
  call need(flag .and. attr == 105, 'copy callback')
  call MPI_Comm_get_attr(dupcomm, key2, attr, flag, ierr)
  call need(.not. flag, 'null copy')
  call MPI_Comm_get_attr(dupcomm, key3, attr, flag, ierr)
  call need(flag .and. attr == 300, 'dup copy')
  call MPI_Comm_free(dupcomm, ierr)
  call MPI_Comm_free(newcomm, ierr)
  call need(deletions == 2, 'delete callback')
  call MPI_Comm_free_keyval(key1, ierr)
  if (rank == 0) print '(a)', 'OK communicators'

  ! One-sided: fence epochs with put, get and accumulate.
  a = -1
  winsize = 20 * 4
  call MPI_Win_create(a, winsize, 4, MPI_INFO_NULL, MPI_COMM_WORLD, win, ierr)
  call MPI_Win_fence(0, win, ierr)
  b(1) = rank
  base = rank
  call MPI_Put(b, 1, MPI_INTEGER, mod(rank + 1, nprocs), base, 1, MPI_INTEGER, win, ierr)
  call MPI_Accumulate(1, 1, MPI_INTEGER, 0, 19_MPI_ADDRESS_KIND, 1, MPI_INTEGER, MPI_SUM, win, ierr)
  call MPI_Win_fence(0, win, ierr)
  n = mod(rank + nprocs - 1, nprocs)
  call need(a(n + 1) == n, 'put')
  if (rank == 0) call need(a(20) == -1 + nprocs, 'accumulate')
  call MPI_Get(b(2), 1, MPI_INTEGER, 0, 19_MPI_ADDRESS_KIND, 1, MPI_INTEGER, win, ierr)
  call MPI_Win_fence(0, win, ierr)
  call need(b(2) == -1 + nprocs, 'get')
  call MPI_Win_free(win, ierr)
  if (rank == 0) print '(a)', 'OK one-sided'

  ! A user-defined reduction written in Fortran.
  call MPI_Op_create(absmax, .true., op, ierr)
  d = [-1d0 * rank, 2d0, -3d0, 0d0]
  call MPI_Allreduce(d, e, 4, MPI_DOUBLE_PRECISION, op, MPI_COMM_WORLD, ierr)
  call need(e(1) == dble(nprocs - 1) .and. e(3) == 3d0, 'user op')
  call MPI_Op_free(op, ierr)
  if (rank == 0) print '(a)', 'OK user op'

  ! MPI_Alltoallw with a datatype per peer.
  do i = 1, nprocs
    counts(i) = 1
    displs(i) = (i - 1) * 4
    ttypes(i) = MPI_INTEGER
    a(i) = rank * 100 + i
  end do
  call MPI_Alltoallw(a, counts, displs, ttypes, b, counts, displs, ttypes, MPI_COMM_WORLD, ierr)
  do i = 1, nprocs
    call need(b(i) == (i - 1) * 100 + rank + 1, 'alltoallw')
  end do
  if (rank == 0) print '(a)', 'OK alltoallw'

  ! Info: keys and values as blank-padded Fortran strings.
  call MPI_Info_create(info, ierr)
  call MPI_Info_set(info, 'colour', 'blue  ', ierr)
  call MPI_Info_get(info, 'colour', MPI_MAX_INFO_VAL, val, flag, ierr)
  call need(flag .and. val == 'blue', 'info get')
  call MPI_Info_get_nkeys(info, n, ierr)
  call need(n == 1, 'info nkeys')
  call MPI_Info_get(info, 'shape', MPI_MAX_INFO_VAL, val, flag, ierr)
  call need(.not. flag, 'info missing key')
  call MPI_Info_free(info, ierr)
  if (rank == 0) print '(a)', 'OK info'

  ! Constants of a kind other than the default INTEGER's.
  call need(MPI_DISPLACEMENT_CURRENT == -1 .and. &
       kind(MPI_DISPLACEMENT_CURRENT) == MPI_OFFSET_KIND, 'MPI_DISPLACEMENT_CURRENT')
  if (rank == 0) print '(a)', 'OK constants'
  ! MPI_SIZEOF: bytes in one element, for scalars and arrays alike.
  call sizes(ierr)
  if (rank == 0) print '(a)', 'OK sizeof'

  ! MPI_Comm_spawn takes MPI_ARGV_NULL and an argument list, and fails with
  ! MPI_ERR_SPAWN (there is no program 'child'; spawn_f08.f90 spawns).
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
  call MPI_Comm_spawn('child', MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &
       spawned, MPI_ERRCODES_IGNORE, ierr)
  call MPI_Error_class(ierr, n, ierr)
  call need(n == MPI_ERR_SPAWN .and. spawned == MPI_COMM_NULL, 'spawn')
  spawn_args(1) = '-v'
  spawn_args(2) = ' '
  call MPI_Comm_spawn('child', spawn_args, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &
       spawned, spawn_codes, ierr)
  call MPI_Error_class(ierr, n, ierr)
  call need(n == MPI_ERR_SPAWN .and. all(spawn_codes == MPI_ERR_SPAWN), 'spawn with argv')
  call MPI_Comm_spawn_multiple(2, spawn_args, MPI_ARGVS_NULL, [1, 1], &
       [MPI_INFO_NULL, MPI_INFO_NULL], 0, MPI_COMM_WORLD, spawned, MPI_ERRCODES_IGNORE, ierr)
  call MPI_Error_class(ierr, n, ierr)
  call need(n == MPI_ERR_SPAWN, 'spawn_multiple')
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL, ierr)
  if (rank == 0) print '(a)', 'OK spawn'
  call MPI_Finalize(ierr)
end program use_mpi
