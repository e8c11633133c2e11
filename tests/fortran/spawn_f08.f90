! spawn_f08.f90 - dynamic processes from mpi_f08: the world spawns two
! copies of this program with an argument list; each child checks its
! parents' group size and sends its world rank to the parents' root, which
! checks every error code and message. Prints "OK spawn" from rank 0; any
! mismatch ends the job with MPI_ABORT.
program spawn_f08
  use mpi_f08
  implicit none
  type(MPI_Comm) :: parent, inter
  integer :: codes(2), n, v, i, rank, size
  character(len=4096) :: exe
  character(len=8) :: args(2)

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, size)
  call MPI_Comm_get_parent(parent)
  if (parent == MPI_COMM_NULL) then
    call get_command_argument(0, exe)
    args(1) = 'child'
    args(2) = ' '
    codes = -1
    call MPI_Comm_spawn(trim(exe), args, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, inter, codes)
    call MPI_Comm_remote_size(inter, n)
    call need(n == 2, 'two children')
    call need(all(codes == MPI_SUCCESS), 'error codes')
    if (rank == 0) then
      do i = 0, 1
        call MPI_Recv(v, 1, MPI_INTEGER, i, 3, inter, MPI_STATUS_IGNORE)
        call need(v == 100 + i, 'message from a child')
      end do
    end if
    call MPI_Comm_disconnect(inter)
    if (rank == 0) print '(a)', 'OK spawn'
  else
    call get_command_argument(1, exe)
    call need(trim(exe) == 'child', 'the argument list')
    call MPI_Comm_remote_size(parent, n)
    call need(size == 2, "children's world")
    v = 100 + rank
    call MPI_Send(v, 1, MPI_INTEGER, 0, 3, parent)
    call MPI_Comm_disconnect(parent)
  end if
  call MPI_Finalize()

contains

  subroutine need(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      print '(a,a)', 'FAIL ', what
      call MPI_Abort(MPI_COMM_WORLD, 1)
    end if
  end subroutine need
end program spawn_f08
