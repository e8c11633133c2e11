! info_keys.f90 - info keys and values from Fortran: leading and trailing
! blanks are not significant, and MPI_INFO_GET_STRING writes at most
! BUFLEN characters of VALUE (none for BUFLEN 0). Prints one OK line per
! part from rank 0; any mismatch ends the job with MPI_ABORT.
program info_keys
  use mpi
  implicit none
  integer :: ierr, rank, info, buflen, vlen, nkeys
  logical :: flag
  character(len=20) :: v
  character(len=MPI_MAX_INFO_KEY) :: key

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Info_create(info, ierr)

  ! Blanks around keys and values are dropped when setting and looking up.
  call MPI_Info_set(info, "  lead", " x  ", ierr)
  call MPI_Info_set(info, "k2", "abc", ierr)
  call MPI_Info_get(info, "lead", 20, v, flag, ierr)
  call need(flag .and. v == "x", "get of a key set with blanks")
  call MPI_Info_get(info, "   k2   ", 20, v, flag, ierr)
  call need(flag .and. v == "abc", "get with blanks around the key")
  call MPI_Info_get_valuelen(info, " lead ", vlen, flag, ierr)
  call need(flag .and. vlen == 1, "valuelen with blanks around the key")
  call MPI_Info_get_nthkey(info, 0, key, ierr)
  call need(key == "lead", "the stored key has no blanks")
  call MPI_Info_delete(info, " lead", ierr)
  call need(ierr == MPI_SUCCESS, "delete with a leading blank")
  call MPI_Info_get_nkeys(info, nkeys, ierr)
  call need(nkeys == 1, "one key left")
  if (rank == 0) print '(a)', 'OK blanks'

  ! BUFLEN 0: VALUE unchanged, BUFLEN gets the length.
  v = 'canary'
  buflen = 0
  call MPI_Info_get_string(info, " k2", buflen, v, flag, ierr)
  call need(flag .and. buflen == 3 .and. v == "canary", "get_string with buflen 0")
  ! BUFLEN 2: two characters written, the rest of VALUE unchanged.
  v = 'canary'
  buflen = 2
  call MPI_Info_get_string(info, "k2", buflen, v, flag, ierr)
  call need(flag .and. buflen == 3 .and. v == "abnary", "get_string with buflen 2")
  ! Room to spare: the value, blank-padded up to BUFLEN only.
  v = 'canary-canary'
  buflen = 5
  call MPI_Info_get_string(info, "k2", buflen, v, flag, ierr)
  call need(flag .and. buflen == 3 .and. v == "abc  y-canary", "get_string with buflen 5")
  if (rank == 0) print '(a)', 'OK get_string'

  call MPI_Info_free(info, ierr)
  call MPI_Finalize(ierr)
contains
  subroutine need(cond, what)
    logical, intent(in) :: cond
    character(len=*), intent(in) :: what
    integer :: ierr2
    if (.not. cond) then
      print '(2a)', 'FAILED: ', what
      call MPI_Abort(MPI_COMM_WORLD, 1, ierr2)
    end if
  end subroutine need
end program info_keys
