! collcheck_f08: exact checks of the nonblocking collectives libwanmpi
! serves, called through the `mpi_f08` module (Open MPI's mpi_ibcast_f08_ &
! co, MPICH's mpi_ibcast_f08ts_), and of the mpi_f08 completion calls that
! must advance them (Open MPI's and MPICH's mpi_f08 call PMPI_Wait & co
! directly, below libwanmpi's C wrappers).
!
! On MPI_COMM_WORLD, a dup and an uneven split (each first gets one blocking
! MPI_Allreduce, checked too): MPI_Ibcast, MPI_Iallreduce (in place or not),
! MPI_Ireduce, MPI_Ireduce_scatter_block, MPI_Iallgather, MPI_Iallgatherv,
! MPI_Ialltoall, MPI_Ialltoallv and MPI_Ibarrier, small (the MPI's own) and
! large (ours), each beside a second MPI_Iallreduce and a ring
! MPI_Isend/MPI_Irecv, completed by MPI_Wait, MPI_Waitall, MPI_Test,
! MPI_Testall, MPI_Waitany, MPI_Testany, MPI_Waitsome, MPI_Testsome,
! MPI_Request_get_status or blocking MPI_Sendrecv/MPI_Ssend/MPI_Probe/
! MPI_Recv/MPI_Mprobe/MPI_Mrecv while they are outstanding; some calls
! leave out the optional IERROR. Every rank computes the expected results.
!
! Usage: collcheck_f08 [MAXCOUNT]   (largest count, default 12289)
! Rank 0 prints "collcheck_f08: N cases ok"; a mismatch is described on
! stderr and the job ends with MPI_Abort.
module collcheck_f08_mod
  use mpi_f08
  implicit none
  integer, parameter :: NB_OPS = 9, NB_WAYS = 11, N2 = 5000
  character(len=28), parameter :: nbname(NB_OPS) = [character(len=28) :: 'MPI_Ibcast', &
       'MPI_Iallreduce', 'MPI_Ireduce', 'MPI_Ireduce_scatter_block', 'MPI_Iallgather', &
       'MPI_Iallgatherv', 'MPI_Ialltoall', 'MPI_Ialltoallv', 'MPI_Ibarrier']
  integer :: ncases = 0, wrank = 0, csalt = 0, nbm = 0
  character(len=40) :: commname = ''
  integer, allocatable :: ia(:), isend(:), ex(:), nbcounts(:), nbdispls(:)
  ! the MPI's own index conventions, measured on its own requests (calibrate):
  ! MPICH 4.0.2's Fortran bindings return 0-based indices from mpi_f08's
  ! MPI_Waitany/Testany/Waitsome/Testsome, and MPI_UNDEFINED + 1 from mpif.h's
  ! MPI_Waitany/Testany; libwanmpi must give exactly what the MPI gives
  integer :: any_off = 0, some_off = 0, any_undef = MPI_UNDEFINED, some_undef = MPI_UNDEFINED
  integer :: s2(N2), r2(N2)
contains

  pure integer function val(c, r, i)
    integer, intent(in) :: c, r, i
    val = mod(i * 7 + r * 13 + c * 5, 2001) - 1000
  end function val

  subroutine fail(what, detail, a, b)
    character(len=*), intent(in) :: what, detail
    integer, intent(in) :: a, b
    write (0, '(a,i0,5a,i0,a,i0,3a,i0)') 'collcheck_f08: FAILED case ', ncases, ': ', what, ' ', &
         detail, ' ', a, ' expected ', b, ' comm=', trim(commname), ' world rank ', wrank
    call MPI_Abort(MPI_COMM_WORLD, 1)
  end subroutine fail

  subroutine check_err(ierr, what)
    integer, intent(in) :: ierr
    character(len=*), intent(in) :: what
    if (ierr /= MPI_SUCCESS) call fail(what, 'returned error', ierr, MPI_SUCCESS)
  end subroutine check_err

  pure integer function a2av_count(n3, from, to)
    integer, intent(in) :: n3, from, to
    a2av_count = n3 * mod(from + 2 * to, 3)
  end function a2av_count

  ! sum over ranks 0..np-1 of val(c, r, off + i), i = 1..n, into ex
  subroutine sum_expected(c, n, np, off)
    integer, intent(in) :: c, n, np, off
    integer :: i, r
    do i = 1, n
      ex(i) = 0
      do r = 0, np - 1
        ex(i) = ex(i) + val(c, r, off + i)
      end do
    end do
  end subroutine sum_expected

  subroutine nb_start(comm, k, n, inplace, req)
    type(MPI_Comm), intent(in) :: comm
    integer, intent(in) :: k, n
    logical, intent(in) :: inplace
    type(MPI_Request), intent(out) :: req
    integer :: me, np, ierr, r, i, root, total, n3, so, ro
    call MPI_Comm_rank(comm, me)
    call MPI_Comm_size(comm, np)
    root = mod(csalt, np)
    ia(1:max(1, n * np)) = -7
    ierr = MPI_SUCCESS
    select case (k)
    case (1)
      if (me == root) then
        do i = 1, n
          ia(i) = val(csalt, root, i)
        end do
      end if
      call MPI_Ibcast(ia, n, MPI_INTEGER, root, comm, req, ierr)
      do i = 1, n
        ex(i) = val(csalt, root, i)
      end do
      nbm = n
    case (2, 3)
      do i = 1, n
        ia(i) = val(csalt, me, i)
        isend(i) = ia(i)
      end do
      if (k == 2 .and. inplace) call MPI_Iallreduce(MPI_IN_PLACE, ia, n, MPI_INTEGER, MPI_SUM, comm, req)
      if (k == 2 .and. .not. inplace) call MPI_Iallreduce(isend, ia, n, MPI_INTEGER, MPI_SUM, comm, req, ierr)
      if (k == 3 .and. inplace .and. me == root) &
           call MPI_Ireduce(MPI_IN_PLACE, ia, n, MPI_INTEGER, MPI_SUM, root, comm, req, ierr)
      if (k == 3 .and. .not. (inplace .and. me == root)) &
           call MPI_Ireduce(isend, ia, n, MPI_INTEGER, MPI_SUM, root, comm, req, ierr)
      call sum_expected(csalt, n, np, 0)
      nbm = n
      if (k == 3 .and. me /= root) nbm = 0
    case (4)
      do i = 1, n * np
        isend(i) = val(csalt, me, i)
      end do
      call MPI_Ireduce_scatter_block(isend, ia, n, MPI_INTEGER, MPI_SUM, comm, req, ierr)
      call sum_expected(csalt, n, np, me * n)
      nbm = n
    case (5)
      if (inplace) then
        do i = 1, n
          ia(me * n + i) = val(csalt, me, i)
        end do
        call MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ia, n, MPI_INTEGER, comm, req, ierr)
      else
        do i = 1, n
          isend(i) = val(csalt, me, i)
        end do
        call MPI_Iallgather(isend, n, MPI_INTEGER, ia, n, MPI_INTEGER, comm, req, ierr)
      end if
      do r = 0, np - 1
        do i = 1, n
          ex(r * n + i) = val(csalt, r, i)
        end do
      end do
      nbm = n * np
    case (6)
      total = 0
      do r = np - 1, 0, -1
        nbcounts(r + 1) = (n / 3) * mod(7 * r + 3, 4)
        nbdispls(r + 1) = total
        total = total + nbcounts(r + 1)
      end do
      do i = 1, nbcounts(me + 1)
        isend(i) = val(csalt, me, i)
      end do
      call MPI_Iallgatherv(isend, nbcounts(me + 1), MPI_INTEGER, ia, nbcounts(1:np), nbdispls(1:np), &
           MPI_INTEGER, comm, req, ierr)
      do r = 0, np - 1
        do i = 1, nbcounts(r + 1)
          ex(nbdispls(r + 1) + i) = val(csalt, r, i)
        end do
      end do
      nbm = total
    case (7)
      do r = 0, np - 1
        do i = 1, n
          isend(r * n + i) = val(csalt + r, me, i)
          ex(r * n + i) = val(csalt + me, r, i)
        end do
      end do
      call MPI_Ialltoall(isend, n, MPI_INTEGER, ia, n, MPI_INTEGER, comm, req, ierr)
      nbm = n * np
    case (8)
      n3 = n / 3
      so = 0
      ro = 0
      do r = 0, np - 1               ! sends in rank order, receives in reverse
        nbcounts(r + 1) = a2av_count(n3, me, r)
        nbdispls(r + 1) = so
        so = so + nbcounts(r + 1)
        nbcounts(np + np - r) = a2av_count(n3, np - 1 - r, me)
        nbdispls(np + np - r) = ro
        ro = ro + nbcounts(np + np - r)
      end do
      do r = 0, np - 1
        do i = 1, nbcounts(r + 1)
          isend(nbdispls(r + 1) + i) = val(csalt + r, me, i)
        end do
        do i = 1, nbcounts(np + r + 1)
          ex(nbdispls(np + r + 1) + i) = val(csalt + me, r, i)
        end do
      end do
      call MPI_Ialltoallv(isend, nbcounts(1:np), nbdispls(1:np), MPI_INTEGER, ia, nbcounts(np + 1:2 * np), &
           nbdispls(np + 1:2 * np), MPI_INTEGER, comm, req, ierr)
      nbm = ro
    case default
      call MPI_Ibarrier(comm, req, ierr)
      nbm = 0
    end select
    call check_err(ierr, trim(nbname(k)))
  end subroutine nb_start

  ! The MPI's own MPI_Waitany and MPI_Waitsome on [MPI_REQUEST_NULL, a receive
  ! that can complete] (MPI_COMM_SELF), then on nulls only.
  subroutine calibrate()
    type(MPI_Request) :: req(2), s
    type(MPI_Status) :: sts(2)
    integer :: a(1), b(1), idx, n, ids(2), way
    a = 5
    do way = 1, 2
      req(1) = MPI_REQUEST_NULL
      call MPI_Isend(a, 1, MPI_INTEGER, 0, 7, MPI_COMM_SELF, s)
      call MPI_Irecv(b, 1, MPI_INTEGER, 0, 7, MPI_COMM_SELF, req(2))
      call MPI_Wait(s, MPI_STATUS_IGNORE)
      if (way == 1) then
        call MPI_Waitany(2, req, idx, sts(1))
        any_off = idx - 2
        call MPI_Waitany(2, req, any_undef, sts(1))
      else
        call MPI_Waitsome(2, req, n, ids, sts)
        some_off = ids(1) - 2
        call MPI_Waitsome(2, req, some_undef, ids, sts)
      end if
    end do
  end subroutine calibrate

  subroutine do_nonblocking(comm, k, n, how, inplace)
    type(MPI_Comm), intent(in) :: comm
    integer, intent(in) :: k, n, how
    logical, intent(in) :: inplace
    integer :: me, np, ierr, i, r, left, right, idx, cnt, done, m2
    type(MPI_Request) :: req(4)
    type(MPI_Status) :: st, sts(4)
    type(MPI_Message) :: msg
    integer :: seen(4), ids(4), sring(3), rring(3), pr(3)
    logical :: flag, all_done
    ncases = ncases + 1
    csalt = csalt + 1
    call MPI_Comm_rank(comm, me)
    call MPI_Comm_size(comm, np)
    left = mod(me + np - 1, np)
    right = mod(me + 1, np)
    call nb_start(comm, k, n, inplace, req(1))
    m2 = 3
    if (mod(csalt, 2) == 0) m2 = N2
    do i = 1, m2
      s2(i) = val(csalt + 3, me, i)
    end do
    r2 = -7
    call MPI_Iallreduce(s2, r2, m2, MPI_INTEGER, MPI_SUM, comm, req(2))
    sring = [me, csalt, 42]
    rring = -1
    call MPI_Irecv(rring, 3, MPI_INTEGER, left, 77, comm, req(3))
    call MPI_Isend(sring, 3, MPI_INTEGER, right, 77, comm, req(4))
    seen = 0
    ierr = MPI_SUCCESS
    select case (how)
    case (1)
      call MPI_Wait(req(2), st, ierr)
      call MPI_Wait(req(1), MPI_STATUS_IGNORE)
      call MPI_Wait(req(3), st, ierr)
      if (st%MPI_SOURCE /= left) call fail('MPI_Wait', 'ring status source', st%MPI_SOURCE, left)
      call MPI_Wait(req(4), MPI_STATUS_IGNORE, ierr)
    case (2)
      call MPI_Waitall(4, req, sts, ierr)
      if (sts(3)%MPI_SOURCE /= left) call fail('MPI_Waitall', 'ring status source', sts(3)%MPI_SOURCE, left)
    case (3)
      do i = 4, 1, -1
        flag = .false.
        do while (.not. flag)
          call MPI_Test(req(i), flag, st, ierr)
          call check_err(ierr, 'MPI_Test')
        end do
        if (i == 3 .and. st%MPI_SOURCE /= left) call fail('MPI_Test', 'ring status source', st%MPI_SOURCE, left)
      end do
    case (4)
      all_done = .false.
      do while (.not. all_done)
        call MPI_Testall(4, req, all_done, MPI_STATUSES_IGNORE)
      end do
    case (5, 6)
      do cnt = 1, 4
        flag = .false.
        do while (.not. flag)
          if (how == 5) then
            call MPI_Waitany(4, req, idx, st, ierr)
            flag = .true.
          else
            call MPI_Testany(4, req, idx, flag, st, ierr)
          end if
          call check_err(ierr, 'MPI_Waitany/MPI_Testany')
        end do
        if (idx /= MPI_UNDEFINED) idx = idx - any_off
        if (idx < 1 .or. idx > 4) call fail('MPI_Waitany/MPI_Testany', 'index', idx, 1)
        seen(idx) = seen(idx) + 1
        if (idx == 3 .and. st%MPI_SOURCE /= left) call fail('MPI_Waitany', 'ring status source', &
             st%MPI_SOURCE, left)
      end do
      call MPI_Waitany(4, req, idx, st, ierr)
      if (idx /= any_undef) call fail('MPI_Waitany', 'index after all done', idx, any_undef)
    case (7, 8)
      done = 0
      do while (done < 4)
        if (how == 7) call MPI_Testsome(4, req, cnt, ids, sts, ierr)
        if (how == 8) call MPI_Waitsome(4, req, cnt, ids, sts, ierr)
        call check_err(ierr, 'MPI_Testsome/MPI_Waitsome')
        if (cnt == some_undef .or. cnt < 0 .or. cnt > 4) call fail('MPI_Testsome', 'outcount', cnt, 4 - done)
        do i = 1, cnt
          ids(i) = ids(i) - some_off
          if (ids(i) < 1 .or. ids(i) > 4) call fail('MPI_Testsome', 'index', ids(i), 1)
          seen(ids(i)) = seen(ids(i)) + 1
          if (ids(i) == 3 .and. sts(i)%MPI_SOURCE /= left) call fail('MPI_Testsome', 'ring status source', &
               sts(i)%MPI_SOURCE, left)
        end do
        done = done + cnt
      end do
      call MPI_Testsome(4, req, cnt, ids, MPI_STATUSES_IGNORE, ierr)
      if (cnt /= some_undef) call fail('MPI_Testsome', 'outcount after all done', cnt, some_undef)
    case (9)
      flag = .false.
      do while (.not. flag)
        call MPI_Request_get_status(req(1), flag, st, ierr)
        call check_err(ierr, 'MPI_Request_get_status')
      end do
      if (req(1) == MPI_REQUEST_NULL) call fail('MPI_Request_get_status', 'freed the request', 0, 1)
      call MPI_Waitall(4, req, MPI_STATUSES_IGNORE, ierr)
    case (10)                           ! blocking MPI_Sendrecv, MPI_Ssend, MPI_Probe and MPI_Recv meanwhile
      call MPI_Sendrecv(sring, 3, MPI_INTEGER, right, 78, pr, 3, MPI_INTEGER, left, 78, comm, st, ierr)
      if (pr(1) /= left .or. st%MPI_SOURCE /= left) call fail('MPI_Sendrecv', 'from', pr(1), left)
      if (np > 1) then                  ! a synchronous ring: rank 0 receives first
        if (me /= 0) call MPI_Ssend(sring, 3, MPI_INTEGER, right, 79, comm)
        call MPI_Probe(left, 79, comm, st)
        if (st%MPI_SOURCE /= left) call fail('MPI_Probe', 'source', st%MPI_SOURCE, left)
        call MPI_Recv(pr, 3, MPI_INTEGER, left, 79, comm, MPI_STATUS_IGNORE, ierr)
        if (me == 0) call MPI_Ssend(sring, 3, MPI_INTEGER, right, 79, comm, ierr)
        if (pr(1) /= left) call fail('MPI_Probe/MPI_Recv', 'from', pr(1), left)
      end if
      call MPI_Waitall(4, req, sts, ierr)
    case default                        ! blocking MPI_Send, MPI_Mprobe and MPI_Mrecv meanwhile
      if (np > 1) then
        if (me /= 0) call MPI_Send(sring, 3, MPI_INTEGER, right, 80, comm, ierr)
        call MPI_Mprobe(left, 80, comm, msg, st, ierr)
        if (st%MPI_SOURCE /= left) call fail('MPI_Mprobe', 'source', st%MPI_SOURCE, left)
        call MPI_Mrecv(pr, 3, MPI_INTEGER, msg, st, ierr)
        if (me == 0) call MPI_Send(sring, 3, MPI_INTEGER, right, 80, comm, ierr)
        if (pr(1) /= left) call fail('MPI_Mprobe/MPI_Mrecv', 'from', pr(1), left)
      end if
      call MPI_Waitall(4, req, sts, ierr)
    end select
    call check_err(ierr, 'completion')
    if (how >= 5 .and. how <= 8) then
      do i = 1, 4
        if (seen(i) /= 1) call fail('MPI_Waitany/Testany/Testsome/Waitsome', 'times index seen', seen(i), 1)
      end do
    end if
    do i = 1, 4
      if (req(i) /= MPI_REQUEST_NULL) call fail('completion', 'request left non-null, index', i, 0)
    end do
    if (rring(1) /= left .or. rring(2) /= csalt .or. rring(3) /= 42) &
         call fail('ring MPI_Irecv', 'payload from', rring(1), left)
    do i = 1, m2
      r = 0
      do idx = 0, np - 1
        r = r + val(csalt + 3, idx, i)
      end do
      if (r2(i) /= r) call fail('MPI_Iallreduce (second)', 'element', r2(i), r)
    end do
    do i = 1, nbm
      if (ia(i) /= ex(i)) call fail(trim(nbname(k)), 'element', ia(i), ex(i))
    end do
  end subroutine do_nonblocking
end module collcheck_f08_mod

program collcheck_f08
  use mpi_f08
  use collcheck_f08_mod
  implicit none
  integer, parameter :: NCOMM = 3
  integer :: ierr, wsize, color, ic, n, np, maxcount, ip, o, i, got(3)
  type(MPI_Comm) :: comms(NCOMM)
  character(len=40) :: names(NCOMM)
  character(len=32) :: arg

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, wrank)
  call MPI_Comm_size(MPI_COMM_WORLD, wsize)
  call calibrate()
  maxcount = 12289
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *, iostat=ierr) maxcount
    if (ierr /= 0 .or. maxcount < 0) then
      if (wrank == 0) write (0, '(3a)') 'collcheck_f08: MAXCOUNT must be a count, not "', trim(arg), '"'
      call MPI_Finalize()
      stop 2
    end if
  end if
  allocate (ia(max(1, maxcount * wsize)), isend(max(1, maxcount * wsize)), ex(max(1, maxcount * wsize)), &
       nbcounts(2 * wsize), nbdispls(2 * wsize))
  comms(1) = MPI_COMM_WORLD
  names(1) = 'MPI_COMM_WORLD'
  call MPI_Comm_dup(MPI_COMM_WORLD, comms(2))
  names(2) = 'dup(world)'
  color = 0
  if (mod(wrank * 5 + 1, 8) < 3) color = 1
  call MPI_Comm_split(MPI_COMM_WORLD, color, wrank, comms(3))
  names(3) = 'split-uneven'

  do ic = 1, NCOMM
    commname = names(ic)
    csalt = ic * 100000
    call MPI_Comm_size(comms(ic), np)
    ! one blocking collective first: it builds libwanmpi's cluster map
    got = [1, wrank, 2]
    call MPI_Allreduce(MPI_IN_PLACE, got, 3, MPI_INTEGER, MPI_SUM, comms(ic), ierr)
    call check_err(ierr, 'MPI_Allreduce')
    if (got(1) /= np .or. got(3) /= 2 * np) call fail('MPI_Allreduce', 'sum', got(1), np)
    do ip = 0, 1
      n = 7
      if (ip == 1) n = maxcount
      do o = 1, NB_OPS
        call do_nonblocking(comms(ic), o, n, 1 + mod(o + 3 * ic + 5 * ip, NB_WAYS), mod(o + ip, 2) == 0)
      end do
    end do
  end do
  do i = 2, NCOMM
    call MPI_Comm_free(comms(i))
  end do
  if (wrank == 0) write (*, '(a,i0,a)') 'collcheck_f08: ', ncases, ' cases ok'
  call MPI_Finalize()
end program collcheck_f08
