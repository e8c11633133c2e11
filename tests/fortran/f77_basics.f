! f77_basics.f - mpif.h in fixed form: point-to-point with statuses and
! wildcards, 1-based MPI_WAITANY indices, every common collective,
! MPI_IN_PLACE, LOGICAL reductions, strings, MPI_WTIME. Prints one OK line
! per part from rank 0; any mismatch ends the job with MPI_ABORT.
      program basics
      implicit none
      include 'mpif.h'
      integer ierr, rank, nprocs, i, n, idx, cnt, src
      integer status(MPI_STATUS_SIZE), stats(MPI_STATUS_SIZE, 2)
      integer req(2), ibuf(8), jbuf(8), all(64), one(64)
      double precision x(4), y(4), t0
      logical l, lall
      character*(MPI_MAX_PROCESSOR_NAME) pname
      character*(MPI_MAX_ERROR_STRING) estr
      character*8 cmds(2)

      call MPI_INIT(ierr)
      call need(ierr .eq. MPI_SUCCESS, 'MPI_INIT')
      call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
      call MPI_COMM_SIZE(MPI_COMM_WORLD, nprocs, ierr)
      call need(nprocs .ge. 2 .and. nprocs .le. 8, 'size')
      t0 = MPI_WTIME()

! Point-to-point: a ring of 8 integers, then a wildcard receive.
      do i = 1, 8
         ibuf(i) = rank * 100 + i
      end do
      call MPI_IRECV(jbuf, 8, MPI_INTEGER, mod(rank+nprocs-1, nprocs),
     &     11, MPI_COMM_WORLD, req(1), ierr)
      call MPI_ISEND(ibuf, 8, MPI_INTEGER, mod(rank+1, nprocs), 11,
     &     MPI_COMM_WORLD, req(2), ierr)
      call MPI_WAITALL(2, req, stats, ierr)
      src = mod(rank+nprocs-1, nprocs)
      call need(jbuf(8) .eq. src*100 + 8, 'ring data')
      call need(stats(MPI_SOURCE, 1) .eq. src, 'ring source')
      call need(stats(MPI_TAG, 1) .eq. 11, 'ring tag')
      call need(req(1) .eq. MPI_REQUEST_NULL, 'request freed')
      if (rank .eq. 0) then
         do i = 1, nprocs - 1
            call MPI_RECV(x, 4, MPI_DOUBLE_PRECISION, MPI_ANY_SOURCE,
     &           MPI_ANY_TAG, MPI_COMM_WORLD, status, ierr)
            call MPI_GET_COUNT(status, MPI_DOUBLE_PRECISION, cnt, ierr)
            call need(cnt .eq. status(MPI_TAG), 'count')
            call need(x(1) .eq. dble(status(MPI_SOURCE)), 'wild data')
         end do
         print '(a)', 'OK point-to-point'
      else
         x(1) = rank
         call MPI_SEND(x, rank, MPI_DOUBLE_PRECISION, 0, rank,
     &        MPI_COMM_WORLD, ierr)
      end if

! MPI_WAITANY gives 1-based indices; MPI_STATUS_IGNORE is accepted.
      call MPI_IRECV(jbuf, 1, MPI_INTEGER, MPI_PROC_NULL, 0,
     &     MPI_COMM_WORLD, req(1), ierr)
      req(2) = MPI_REQUEST_NULL
      call MPI_WAITANY(2, req, idx, MPI_STATUS_IGNORE, ierr)
      call need(idx .eq. 1, 'waitany index')
      call MPI_WAITANY(2, req, idx, status, ierr)
      call need(idx .eq. MPI_UNDEFINED, 'waitany none left')

! Collectives.
      do i = 1, 4
         x(i) = rank + i
      end do
      call MPI_ALLREDUCE(x, y, 4, MPI_DOUBLE_PRECISION, MPI_SUM,
     &     MPI_COMM_WORLD, ierr)
      call need(y(2) .eq. dble(nprocs*(nprocs-1)/2 + 2*nprocs), 'sum')
      call MPI_ALLREDUCE(MPI_IN_PLACE, x, 4, MPI_DOUBLE_PRECISION,
     &     MPI_MAX, MPI_COMM_WORLD, ierr)
      call need(x(1) .eq. dble(nprocs), 'in place max')
      n = 0
      if (rank .eq. 0) n = 42
      call MPI_BCAST(n, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
      call need(n .eq. 42, 'bcast')
      call MPI_REDUCE(rank, n, 1, MPI_INTEGER, MPI_SUM, nprocs-1,
     &     MPI_COMM_WORLD, ierr)
      if (rank .eq. nprocs-1) then
         call need(n .eq. nprocs*(nprocs-1)/2, 'reduce')
      end if
      l = rank .ge. 0
      call MPI_ALLREDUCE(l, lall, 1, MPI_LOGICAL, MPI_LAND,
     &     MPI_COMM_WORLD, ierr)
      call need(lall, 'land')
      l = rank .eq. 1
      call MPI_ALLREDUCE(l, lall, 1, MPI_LOGICAL, MPI_LOR,
     &     MPI_COMM_WORLD, ierr)
      call need(lall, 'lor')
      x(1) = mod(rank, 2)
      x(2) = rank
      call MPI_ALLREDUCE(x, y, 1, MPI_2DOUBLE_PRECISION, MPI_MAXLOC,
     &     MPI_COMM_WORLD, ierr)
      call need(y(1) .eq. 1d0 .and. y(2) .eq. 1d0, 'maxloc')
      call MPI_ALLREDUCE(x, y, 1, MPI_2DOUBLE_PRECISION, MPI_MINLOC,
     &     MPI_COMM_WORLD, ierr)
      call need(y(1) .eq. 0d0 .and. y(2) .eq. 0d0, 'minloc')
      call MPI_ALLGATHER(rank, 1, MPI_INTEGER, all, 1, MPI_INTEGER,
     &     MPI_COMM_WORLD, ierr)
      do i = 1, nprocs
         call need(all(i) .eq. i-1, 'allgather')
      end do
      call MPI_GATHER(rank*2, 1, MPI_INTEGER, all, 1, MPI_INTEGER, 0,
     &     MPI_COMM_WORLD, ierr)
      if (rank .eq. 0) call need(all(nprocs) .eq. 2*(nprocs-1),
     &     'gather')
      do i = 1, nprocs
         one(i) = rank * 10 + i
      end do
      call MPI_ALLTOALL(one, 1, MPI_INTEGER, all, 1, MPI_INTEGER,
     &     MPI_COMM_WORLD, ierr)
      do i = 1, nprocs
         call need(all(i) .eq. (i-1)*10 + rank + 1, 'alltoall')
      end do
      call MPI_SCATTER(one, 1, MPI_INTEGER, n, 1, MPI_INTEGER, 1,
     &     MPI_COMM_WORLD, ierr)
      call need(n .eq. 10 + rank + 1, 'scatter')
      call MPI_SCAN(1, n, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD,
     &     ierr)
      call need(n .eq. rank + 1, 'scan')
      call MPI_REDUCE_SCATTER_BLOCK(one, n, 1, MPI_INTEGER, MPI_SUM,
     &     MPI_COMM_WORLD, ierr)
      call need(n .eq. 10*nprocs*(nprocs-1)/2 + nprocs*(rank+1),
     &     'reduce_scatter_block')
      call MPI_BARRIER(MPI_COMM_WORLD, ierr)
      if (rank .eq. 0) print '(a)', 'OK collectives'

! Strings: blank-padded, lengths right.
      call MPI_GET_PROCESSOR_NAME(pname, n, ierr)
      call need(n .gt. 0 .and. pname(n+1:n+1) .eq. ' ', 'proc name')
      call MPI_ERROR_STRING(MPI_ERR_TAG, estr, n, ierr)
      call need(n .gt. 0 .and. index(estr, 'MPI_ERR_TAG') .gt. 0,
     &     'error string')
      call MPI_ERROR_CLASS(MPI_ERR_TAG, n, ierr)
      call need(n .eq. MPI_ERR_TAG, 'error class')
      call need(MPI_WTIME() .ge. t0 .and. MPI_WTICK() .gt. 0d0, 'time')
      if (rank .eq. 0) print '(a)', 'OK strings'

! Constants of a kind other than the default INTEGER's.
      call need(MPI_DISPLACEMENT_CURRENT .eq. -1 .and.
     &     kind(MPI_DISPLACEMENT_CURRENT) .eq. MPI_OFFSET_KIND,
     &     'MPI_DISPLACEMENT_CURRENT')
      if (rank .eq. 0) print '(a)', 'OK constants'

! MPI_COMM_SPAWN takes MPI_ARGV_NULL and MPI_ERRCODES_IGNORE, and fails
! with MPI_ERR_SPAWN (there is no program 'child'; spawn_f08.f90 spawns).
      call MPI_COMM_SET_ERRHANDLER(MPI_COMM_WORLD, MPI_ERRORS_RETURN,
     &     ierr)
      call MPI_COMM_SPAWN('child', MPI_ARGV_NULL, 2, MPI_INFO_NULL, 0,
     &     MPI_COMM_WORLD, n, MPI_ERRCODES_IGNORE, ierr)
      call MPI_ERROR_CLASS(ierr, cnt, i)
      call need(cnt .eq. MPI_ERR_SPAWN .and. n .eq. MPI_COMM_NULL,
     &     'spawn')
      cmds(1) = 'a'
      cmds(2) = 'b'
      ibuf(1) = 1
      ibuf(2) = 1
      req(1) = MPI_INFO_NULL
      req(2) = MPI_INFO_NULL
      call MPI_COMM_SPAWN_MULTIPLE(2, cmds, MPI_ARGVS_NULL, ibuf,
     &     req, 0, MPI_COMM_WORLD, n, jbuf, ierr)
      call MPI_ERROR_CLASS(ierr, cnt, i)
      call need(cnt .eq. MPI_ERR_SPAWN .and. jbuf(1) .eq. MPI_ERR_SPAWN
     &     .and. jbuf(2) .eq. MPI_ERR_SPAWN, 'spawn_multiple')
      call MPI_COMM_SET_ERRHANDLER(MPI_COMM_WORLD,
     &     MPI_ERRORS_ARE_FATAL, ierr)
      if (rank .eq. 0) print '(a)', 'OK spawn'
      call MPI_FINALIZE(ierr)
      end

      subroutine need(cond, what)
      implicit none
      include 'mpif.h'
      logical cond
      character*(*) what
      integer ierr
      if (.not. cond) then
         print '(2a)', 'FAILED: ', what
         call MPI_ABORT(MPI_COMM_WORLD, 1, ierr)
      end if
      end
