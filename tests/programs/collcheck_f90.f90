! collcheck_f90: exact checks of collectives called through the Fortran
! bindings of the `mpi` module (what libwanmpi must intercept for Fortran
! programs): MPI_Bcast, MPI_Allreduce, MPI_Reduce, MPI_Allgather(v),
! MPI_Gather(v), MPI_Scatter(v), MPI_Scan and MPI_Exscan with
! INTEGER, REAL and DOUBLE PRECISION data, MPI_SUM, MPI_MAX and MPI_MIN,
! MPI_IN_PLACE, every root, on MPI_COMM_WORLD, a dup of it and communicators
! made by MPI_Comm_split (uneven groups, reversed keys). Every rank computes
! the expected result itself; the data are small integers (quarters for
! DOUBLE PRECISION), so every reduction order is exact.
!
! Then, on each communicator, the nonblocking collectives libwanmpi serves
! (MPI_Ibcast, MPI_Iallreduce, MPI_Ireduce, MPI_Ireduce_scatter_block,
! MPI_Iallgather(v), MPI_Ialltoall(v), MPI_Ibarrier), small and large, each
! with a second one (an MPI_Iallreduce) and a ring MPI_Isend/MPI_Irecv
! outstanding beside it, completed by a way drawn from the case: MPI_Wait,
! MPI_Waitall, MPI_Test, MPI_Testall, MPI_Testany, MPI_Waitany, MPI_Testsome
! or MPI_Waitsome loops (1-based indices, each once, then MPI_UNDEFINED),
! MPI_Request_get_status, or blocking MPI_Sendrecv/MPI_Probe/MPI_Recv and
! MPI_Ssend while they are outstanding; every request must end as
! MPI_REQUEST_NULL and the ring's status name its source. And the persistent
! ones (MPI-4's MPI_<COLL>_INIT under MPICH, Open MPI's MPIX_<COLL>_INIT,
! found by name at run time), started three times with new input.
!
! Usage: collcheck_f90 [MAXCOUNT]   (largest count, default 65539; the
! counts are 0, 1, 7, 1021, 4099, 65539 and 262147, up to MAXCOUNT)
! Rank 0 prints "collcheck_f90: N cases ok"; a mismatch is described on
! stderr and the job ends with MPI_Abort.
module collcheck_f90_mod
  use mpi
  use, intrinsic :: iso_c_binding, only: c_associated, c_char, c_f_procpointer, c_funptr, c_null_char, &
       c_null_ptr, c_ptr
  implicit none
  integer, parameter :: T_INT = 1, T_REAL = 2, T_DBL = 3
  integer, parameter :: O_SUM = 1, O_MAX = 2, O_MIN = 3
  character(len=16), parameter :: tname(3) = &
       [character(len=16) :: 'INTEGER', 'REAL', 'DOUBLE PRECISION']
  character(len=8), parameter :: oname(3) = [character(len=8) :: 'MPI_SUM', 'MPI_MAX', 'MPI_MIN']
  integer :: ncases = 0, wrank = 0
  integer :: csalt = 0 ! case salt, identical on the ranks of one communicator
  character(len=40) :: commname = ''
  integer, allocatable :: ia(:), ib(:)
  real, allocatable :: ra(:), rb(:)
  double precision, allocatable :: da(:), db(:), ex(:)
  integer, allocatable :: isend(:)          ! nonblocking: the send buffer
  integer, parameter :: NB_OPS = 9, NB_WAYS = 10, N2 = 5000
  character(len=28), parameter :: nbname(NB_OPS) = [character(len=28) :: 'MPI_Ibcast', &
       'MPI_Iallreduce', 'MPI_Ireduce', 'MPI_Ireduce_scatter_block', 'MPI_Iallgather', &
       'MPI_Iallgatherv', 'MPI_Ialltoall', 'MPI_Ialltoallv', 'MPI_Ibarrier']
  ! the MPI's own index conventions, measured on its own requests (calibrate):
  ! MPICH 4.0.2's Fortran bindings return 0-based indices from mpi_f08's
  ! MPI_Waitany/Testany/Waitsome/Testsome, and MPI_UNDEFINED + 1 from mpif.h's
  ! MPI_Waitany/Testany; libwanmpi must give exactly what the MPI gives
  integer :: any_off = 0, some_off = 0, any_undef = MPI_UNDEFINED, some_undef = MPI_UNDEFINED
  integer :: s2(N2), r2(N2)                 ! the second collective's buffers
  integer :: nbm                            ! elements of ex to compare
  integer, allocatable :: nbcounts(:), nbdispls(:)   ! v-variants' arrays, valid until completion
  ! the persistent collectives' Fortran bindings, called through a procedure pointer
  abstract interface
    subroutine bcast_init_t(buf, count, type, root, comm, info, req, ierr)
      integer :: buf(*), count, type, root, comm, info, req, ierr
    end subroutine bcast_init_t
    subroutine allreduce_init_t(sbuf, rbuf, count, type, op, comm, info, req, ierr)
      integer :: sbuf(*), rbuf(*), count, type, op, comm, info, req, ierr
    end subroutine allreduce_init_t
    subroutine reduce_init_t(sbuf, rbuf, count, type, op, root, comm, info, req, ierr)
      integer :: sbuf(*), rbuf(*), count, type, op, root, comm, info, req, ierr
    end subroutine reduce_init_t
    subroutine allgather_init_t(sbuf, scount, stype, rbuf, rcount, rtype, comm, info, req, ierr)
      integer :: sbuf(*), scount, stype, rbuf(*), rcount, rtype, comm, info, req, ierr
    end subroutine allgather_init_t
    subroutine allgatherv_init_t(sbuf, scount, stype, rbuf, rcounts, displs, rtype, comm, info, req, ierr)
      integer :: sbuf(*), scount, stype, rbuf(*), rcounts(*), displs(*), rtype, comm, info, req, ierr
    end subroutine allgatherv_init_t
    subroutine alltoallv_init_t(sbuf, scounts, sdispls, stype, rbuf, rcounts, rdispls, rtype, comm, info, req, &
         ierr)
      integer :: sbuf(*), scounts(*), sdispls(*), stype, rbuf(*), rcounts(*), rdispls(*), rtype, comm, info, &
           req, ierr
    end subroutine alltoallv_init_t
  end interface
  interface
    type(c_funptr) function c_dlsym(handle, name) bind(C, name='dlsym')
      import :: c_ptr, c_funptr, c_char
      type(c_ptr), value :: handle
      character(kind=c_char), intent(in) :: name(*)
    end function c_dlsym
  end interface
contains

  ! input element i of rank r in case c (exactly representable in all types)
  pure double precision function val(c, r, i, t)
    integer, intent(in) :: c, r, i, t
    integer :: k
    k = mod(i * 7 + r * 13 + c * 5, 2001) - 1000
    if (t == T_DBL) then
      val = dble(k) / 4d0
    else
      val = dble(k)
    end if
  end function val

  integer function mpitype(t)
    integer, intent(in) :: t
    select case (t)
    case (T_INT)
      mpitype = MPI_INTEGER
    case (T_REAL)
      mpitype = MPI_REAL
    case default
      mpitype = MPI_DOUBLE_PRECISION
    end select
  end function mpitype

  integer function mpiop(o)
    integer, intent(in) :: o
    select case (o)
    case (O_SUM)
      mpiop = MPI_SUM
    case (O_MAX)
      mpiop = MPI_MAX
    case default
      mpiop = MPI_MIN
    end select
  end function mpiop

  ! fill buffer "a" of type t (elements off+1 .. off+n) with rank r's input
  subroutine fill(t, r, n, off, c)
    integer, intent(in) :: t, r, n, off, c
    integer :: i
    do i = 1, n
      select case (t)
      case (T_INT)
        ia(off + i) = nint(val(c, r, i, t))
      case (T_REAL)
        ra(off + i) = real(val(c, r, i, t))
      case default
        da(off + i) = val(c, r, i, t)
      end select
    end do
  end subroutine fill

  double precision function got(t, i)
    integer, intent(in) :: t, i
    select case (t)
    case (T_INT)
      got = dble(ia(i))
    case (T_REAL)
      got = dble(ra(i))
    case default
      got = da(i)
    end select
  end function got

  subroutine compare(what, t, n, root, inplace)
    character(len=*), intent(in) :: what
    integer, intent(in) :: t, n, root
    logical, intent(in) :: inplace
    integer :: i, ierr
    do i = 1, n
      if (got(t, i) /= ex(i)) then
        write (0, '(a,i0,5a,i0,a,i0,a,l1,3a,i0,a,i0,a,g0,a,g0)') &
             'collcheck_f90: FAILED case ', ncases, ': ', trim(what), &
             ' type=', trim(tname(t)), ' count=', n, ' root=', root, ' in_place=', inplace, &
             ' comm=', trim(commname), ' world rank ', wrank, ': index ', i, ' got ', &
             got(t, i), ' expected ', ex(i)
        call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
      end if
    end do
  end subroutine compare

  subroutine check_err(ierr, what)
    integer, intent(in) :: ierr
    character(len=*), intent(in) :: what
    integer :: e
    if (ierr /= MPI_SUCCESS) then
      write (0, '(a,i0,3a,i0)') 'collcheck_f90: FAILED case ', ncases, ': ', what, &
           ' returned error ', ierr
      call MPI_Abort(MPI_COMM_WORLD, 1, e)
    end if
  end subroutine check_err

  subroutine do_bcast(comm, t, n, root)
    integer, intent(in) :: comm, t, n, root
    integer :: me, ierr, i
    ncases = ncases + 1
    csalt = csalt + 1
    call MPI_Comm_rank(comm, me, ierr)
    if (me == root) then
      call fill(t, me, n, 0, csalt)
    else
      ia(1:n) = -7
      ra(1:n) = -7.0
      da(1:n) = -7d0
    end if
    select case (t)
    case (T_INT)
      call MPI_Bcast(ia, n, MPI_INTEGER, root, comm, ierr)
    case (T_REAL)
      call MPI_Bcast(ra, n, MPI_REAL, root, comm, ierr)
    case default
      call MPI_Bcast(da, n, MPI_DOUBLE_PRECISION, root, comm, ierr)
    end select
    call check_err(ierr, 'MPI_Bcast')
    do i = 1, n
      ex(i) = val(csalt, root, i, t)
    end do
    call compare('MPI_Bcast', t, n, root, .false.)
  end subroutine do_bcast

  ! expected reduction over ranks 0..size-1, elements off+1 .. off+n of each input
  subroutine reduce_expected(t, o, n, nranks, off)
    integer, intent(in) :: t, o, n, nranks, off
    integer :: r, i
    double precision :: v
    do i = 1, n
      ex(i) = val(csalt, 0, off + i, t)
      do r = 1, nranks - 1
        v = val(csalt, r, off + i, t)
        select case (o)
        case (O_SUM)
          ex(i) = ex(i) + v
        case (O_MAX)
          ex(i) = max(ex(i), v)
        case default
          ex(i) = min(ex(i), v)
        end select
      end do
    end do
  end subroutine reduce_expected

  subroutine do_allreduce(comm, t, o, n, inplace)
    integer, intent(in) :: comm, t, o, n
    logical, intent(in) :: inplace
    integer :: me, np, ierr
    ncases = ncases + 1
    csalt = csalt + 1
    call MPI_Comm_rank(comm, me, ierr)
    call MPI_Comm_size(comm, np, ierr)
    call fill(t, me, n, 0, csalt)
    if (inplace) then
      select case (t)
      case (T_INT)
        call MPI_Allreduce(MPI_IN_PLACE, ia, n, MPI_INTEGER, mpiop(o), comm, ierr)
      case (T_REAL)
        call MPI_Allreduce(MPI_IN_PLACE, ra, n, MPI_REAL, mpiop(o), comm, ierr)
      case default
        call MPI_Allreduce(MPI_IN_PLACE, da, n, MPI_DOUBLE_PRECISION, mpiop(o), comm, ierr)
      end select
    else
      select case (t)
      case (T_INT)
        ib(1:n) = ia(1:n)
        call MPI_Allreduce(ib, ia, n, MPI_INTEGER, mpiop(o), comm, ierr)
      case (T_REAL)
        rb(1:n) = ra(1:n)
        call MPI_Allreduce(rb, ra, n, MPI_REAL, mpiop(o), comm, ierr)
      case default
        db(1:n) = da(1:n)
        call MPI_Allreduce(db, da, n, MPI_DOUBLE_PRECISION, mpiop(o), comm, ierr)
      end select
    end if
    call check_err(ierr, 'MPI_Allreduce')
    call reduce_expected(t, o, n, np, 0)
    call compare('MPI_Allreduce ' // oname(o), t, n, -1, inplace)
  end subroutine do_allreduce

  subroutine do_reduce(comm, t, o, n, root, inplace)
    integer, intent(in) :: comm, t, o, n, root
    logical, intent(in) :: inplace
    integer :: me, np, ierr
    ncases = ncases + 1
    csalt = csalt + 1
    call MPI_Comm_rank(comm, me, ierr)
    call MPI_Comm_size(comm, np, ierr)
    call fill(t, me, n, 0, csalt)
    if (inplace .and. me == root) then
      select case (t)
      case (T_INT)
        call MPI_Reduce(MPI_IN_PLACE, ia, n, MPI_INTEGER, mpiop(o), root, comm, ierr)
      case (T_REAL)
        call MPI_Reduce(MPI_IN_PLACE, ra, n, MPI_REAL, mpiop(o), root, comm, ierr)
      case default
        call MPI_Reduce(MPI_IN_PLACE, da, n, MPI_DOUBLE_PRECISION, mpiop(o), root, comm, ierr)
      end select
    else
      select case (t)
      case (T_INT)
        ib(1:n) = ia(1:n)
        call MPI_Reduce(ib, ia, n, MPI_INTEGER, mpiop(o), root, comm, ierr)
      case (T_REAL)
        rb(1:n) = ra(1:n)
        call MPI_Reduce(rb, ra, n, MPI_REAL, mpiop(o), root, comm, ierr)
      case default
        db(1:n) = da(1:n)
        call MPI_Reduce(db, da, n, MPI_DOUBLE_PRECISION, mpiop(o), root, comm, ierr)
      end select
    end if
    call check_err(ierr, 'MPI_Reduce')
    if (me == root) then
      call reduce_expected(t, o, n, np, 0)
      call compare('MPI_Reduce ' // oname(o), t, n, root, inplace)
    end if
  end subroutine do_reduce

  subroutine do_allgather(comm, t, n, inplace)
    integer, intent(in) :: comm, t, n
    logical, intent(in) :: inplace
    integer :: me, np, ierr, r, i
    ncases = ncases + 1
    csalt = csalt + 1
    call MPI_Comm_rank(comm, me, ierr)
    call MPI_Comm_size(comm, np, ierr)
    ia(1:n * np) = -7
    ra(1:n * np) = -7.0
    da(1:n * np) = -7d0
    if (inplace) then
      call fill(t, me, n, me * n, csalt)
      select case (t)
      case (T_INT)
        call MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ia, n, MPI_INTEGER, comm, ierr)
      case (T_REAL)
        call MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ra, n, MPI_REAL, comm, ierr)
      case default
        call MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, da, n, MPI_DOUBLE_PRECISION, &
             comm, ierr)
      end select
    else
      do i = 1, n
        ib(i) = nint(val(csalt, me, i, t))
        rb(i) = real(val(csalt, me, i, t))
        db(i) = val(csalt, me, i, t)
      end do
      select case (t)
      case (T_INT)
        call MPI_Allgather(ib, n, MPI_INTEGER, ia, n, MPI_INTEGER, comm, ierr)
      case (T_REAL)
        call MPI_Allgather(rb, n, MPI_REAL, ra, n, MPI_REAL, comm, ierr)
      case default
        call MPI_Allgather(db, n, MPI_DOUBLE_PRECISION, da, n, MPI_DOUBLE_PRECISION, comm, ierr)
      end select
    end if
    call check_err(ierr, 'MPI_Allgather')
    do r = 0, np - 1
      do i = 1, n
        ex(r * n + i) = val(csalt, r, i, t)
      end do
    end do
    call compare('MPI_Allgather', t, n * np, -1, inplace)
  end subroutine do_allgather

  ! MPI_Allgatherv: rank r contributes n * mod(7r + 3, 4) elements (some none),
  ! placed in reverse rank order (tests/programs/collcheck.c does the same)
  subroutine do_allgatherv(comm, t, n, inplace)
    integer, intent(in) :: comm, t, n
    logical, intent(in) :: inplace
    integer :: me, np, ierr, r, i, total
    integer, allocatable :: cnts(:), displs(:)
    ncases = ncases + 1
    csalt = csalt + 1
    call MPI_Comm_rank(comm, me, ierr)
    call MPI_Comm_size(comm, np, ierr)
    allocate (cnts(0:np - 1), displs(0:np - 1))
    total = 0
    do r = np - 1, 0, -1
      cnts(r) = n * mod(7 * r + 3, 4)
      displs(r) = total
      total = total + cnts(r)
    end do
    ia(1:total) = -7
    ra(1:total) = -7.0
    da(1:total) = -7d0
    if (inplace) then
      call fill(t, me, cnts(me), displs(me), csalt)
      select case (t)
      case (T_INT)
        call MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ia, cnts, displs, MPI_INTEGER, comm, ierr)
      case (T_REAL)
        call MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ra, cnts, displs, MPI_REAL, comm, ierr)
      case default
        call MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, da, cnts, displs, MPI_DOUBLE_PRECISION, &
             comm, ierr)
      end select
    else
      do i = 1, cnts(me)
        ib(i) = nint(val(csalt, me, i, t))
        rb(i) = real(val(csalt, me, i, t))
        db(i) = val(csalt, me, i, t)
      end do
      select case (t)
      case (T_INT)
        call MPI_Allgatherv(ib, cnts(me), MPI_INTEGER, ia, cnts, displs, MPI_INTEGER, comm, ierr)
      case (T_REAL)
        call MPI_Allgatherv(rb, cnts(me), MPI_REAL, ra, cnts, displs, MPI_REAL, comm, ierr)
      case default
        call MPI_Allgatherv(db, cnts(me), MPI_DOUBLE_PRECISION, da, cnts, displs, MPI_DOUBLE_PRECISION, &
             comm, ierr)
      end select
    end if
    call check_err(ierr, 'MPI_Allgatherv')
    do r = 0, np - 1
      do i = 1, cnts(r)
        ex(displs(r) + i) = val(csalt, r, i, t)
      end do
    end do
    call compare('MPI_Allgatherv', t, total, -1, inplace)
    deallocate (cnts, displs)
  end subroutine do_allgatherv
  ! MPI_Reduce_scatter: rank r gets n * mod(7r + 3, 4) elements (some none) of
  ! the reduced vector, the blocks in rank order
  subroutine do_reduce_scatter(comm, t, o, n, inplace)
    integer, intent(in) :: comm, t, o, n
    logical, intent(in) :: inplace
    integer :: me, np, ierr, r, total
    integer, allocatable :: cnts(:), displs(:)
    ncases = ncases + 1
    csalt = csalt + 1
    call MPI_Comm_rank(comm, me, ierr)
    call MPI_Comm_size(comm, np, ierr)
    allocate (cnts(0:np - 1), displs(0:np - 1))
    total = 0
    do r = 0, np - 1
      cnts(r) = n * mod(7 * r + 3, 4)
      displs(r) = total
      total = total + cnts(r)
    end do
    call fill(t, me, total, 0, csalt)
    if (inplace) then
      select case (t)
      case (T_INT)
        call MPI_Reduce_scatter(MPI_IN_PLACE, ia, cnts, MPI_INTEGER, mpiop(o), comm, ierr)
      case (T_REAL)
        call MPI_Reduce_scatter(MPI_IN_PLACE, ra, cnts, MPI_REAL, mpiop(o), comm, ierr)
      case default
        call MPI_Reduce_scatter(MPI_IN_PLACE, da, cnts, MPI_DOUBLE_PRECISION, mpiop(o), comm, ierr)
      end select
    else
      select case (t)
      case (T_INT)
        ib(1:total) = ia(1:total)
        call MPI_Reduce_scatter(ib, ia, cnts, MPI_INTEGER, mpiop(o), comm, ierr)
      case (T_REAL)
        rb(1:total) = ra(1:total)
        call MPI_Reduce_scatter(rb, ra, cnts, MPI_REAL, mpiop(o), comm, ierr)
      case default
        db(1:total) = da(1:total)
        call MPI_Reduce_scatter(db, da, cnts, MPI_DOUBLE_PRECISION, mpiop(o), comm, ierr)
      end select
    end if
    call check_err(ierr, 'MPI_Reduce_scatter')
    call reduce_expected(t, o, cnts(me), np, displs(me))
    call compare('MPI_Reduce_scatter ' // oname(o), t, cnts(me), -1, inplace)
    deallocate (cnts, displs)
  end subroutine do_reduce_scatter
  ! the blocks of MPI_Gather(v) and MPI_Scatter(v) at the root: v, rank r's has
  ! n * mod(7r + 3, 4) elements (some none) in reverse rank order, as in
  ! do_allgatherv; else n elements each, in rank order
  subroutine rooted_blocks(np, n, v, cnts, displs, total)
    integer, intent(in) :: np, n
    logical, intent(in) :: v
    integer, intent(out) :: cnts(0:np - 1), displs(0:np - 1), total
    integer :: r
    total = 0
    do r = np - 1, 0, -1
      cnts(r) = n
      if (v) cnts(r) = n * mod(7 * r + 3, 4)
      displs(r) = total
      if (.not. v) displs(r) = r * n
      total = total + cnts(r)
    end do
  end subroutine rooted_blocks

  ! MPI_Gather (v false) or MPI_Gatherv (v true) onto root
  subroutine do_gather(comm, t, n, root, inplace, v)
    integer, intent(in) :: comm, t, n, root
    logical, intent(in) :: inplace, v
    integer :: me, np, ierr, r, i, total, ty
    integer, allocatable :: cnts(:), displs(:)
    character(len=12) :: what
    ncases = ncases + 1
    csalt = csalt + 1
    call MPI_Comm_rank(comm, me, ierr)
    call MPI_Comm_size(comm, np, ierr)
    allocate (cnts(0:np - 1), displs(0:np - 1))
    call rooted_blocks(np, n, v, cnts, displs, total)
    what = 'MPI_Gather'
    if (v) what = 'MPI_Gatherv'
    ty = mpitype(t)
    ia(1:total) = -7
    ra(1:total) = -7.0
    da(1:total) = -7d0
    do i = 1, cnts(me)
      ib(i) = nint(val(csalt, me, i, t))
      rb(i) = real(val(csalt, me, i, t))
      db(i) = val(csalt, me, i, t)
    end do
    if (inplace .and. me == root) then
      call fill(t, me, cnts(me), displs(me), csalt)
      select case (t)
      case (T_INT)
        if (v) call MPI_Gatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ia, cnts, displs, ty, root, comm, ierr)
        if (.not. v) call MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ia, n, ty, root, comm, ierr)
      case (T_REAL)
        if (v) call MPI_Gatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ra, cnts, displs, ty, root, comm, ierr)
        if (.not. v) call MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ra, n, ty, root, comm, ierr)
      case default
        if (v) call MPI_Gatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, da, cnts, displs, ty, root, comm, ierr)
        if (.not. v) call MPI_Gather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, da, n, ty, root, comm, ierr)
      end select
    else
      select case (t)
      case (T_INT)
        if (v) call MPI_Gatherv(ib, cnts(me), ty, ia, cnts, displs, ty, root, comm, ierr)
        if (.not. v) call MPI_Gather(ib, n, ty, ia, n, ty, root, comm, ierr)
      case (T_REAL)
        if (v) call MPI_Gatherv(rb, cnts(me), ty, ra, cnts, displs, ty, root, comm, ierr)
        if (.not. v) call MPI_Gather(rb, n, ty, ra, n, ty, root, comm, ierr)
      case default
        if (v) call MPI_Gatherv(db, cnts(me), ty, da, cnts, displs, ty, root, comm, ierr)
        if (.not. v) call MPI_Gather(db, n, ty, da, n, ty, root, comm, ierr)
      end select
    end if
    call check_err(ierr, trim(what))
    if (me == root) then
      do r = 0, np - 1
        do i = 1, cnts(r)
          ex(displs(r) + i) = val(csalt, r, i, t)
        end do
      end do
    else
      ex(1:total) = -7d0                  ! a non-root rank's receive buffer stays untouched
    end if
    call compare(trim(what), t, total, root, inplace)
    deallocate (cnts, displs)
  end subroutine do_gather

  ! MPI_Scatter (v false) or MPI_Scatterv (v true) from root
  subroutine do_scatter(comm, t, n, root, inplace, v)
    integer, intent(in) :: comm, t, n, root
    logical, intent(in) :: inplace, v
    integer :: me, np, ierr, r, i, total, ty, mine
    integer, allocatable :: cnts(:), displs(:)
    character(len=12) :: what
    ncases = ncases + 1
    csalt = csalt + 1
    call MPI_Comm_rank(comm, me, ierr)
    call MPI_Comm_size(comm, np, ierr)
    allocate (cnts(0:np - 1), displs(0:np - 1))
    call rooted_blocks(np, n, v, cnts, displs, total)
    what = 'MPI_Scatter'
    if (v) what = 'MPI_Scatterv'
    ty = mpitype(t)
    mine = cnts(me)
    ia(1:total) = -7
    ra(1:total) = -7.0
    da(1:total) = -7d0
    ib(1:mine) = -7
    rb(1:mine) = -7.0
    db(1:mine) = -7d0
    if (me == root) then
      do r = 0, np - 1
        call fill(t, r, cnts(r), displs(r), csalt)
      end do
    end if
    if (inplace .and. me == root) then
      select case (t)
      case (T_INT)
        if (v) call MPI_Scatterv(ia, cnts, displs, ty, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root, comm, ierr)
        if (.not. v) call MPI_Scatter(ia, n, ty, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root, comm, ierr)
      case (T_REAL)
        if (v) call MPI_Scatterv(ra, cnts, displs, ty, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root, comm, ierr)
        if (.not. v) call MPI_Scatter(ra, n, ty, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root, comm, ierr)
      case default
        if (v) call MPI_Scatterv(da, cnts, displs, ty, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root, comm, ierr)
        if (.not. v) call MPI_Scatter(da, n, ty, MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, root, comm, ierr)
      end select
      ia(1:mine) = ia(displs(me) + 1:displs(me) + mine)
      ra(1:mine) = ra(displs(me) + 1:displs(me) + mine)
      da(1:mine) = da(displs(me) + 1:displs(me) + mine)
    else
      select case (t)
      case (T_INT)
        if (v) call MPI_Scatterv(ia, cnts, displs, ty, ib, mine, ty, root, comm, ierr)
        if (.not. v) call MPI_Scatter(ia, n, ty, ib, n, ty, root, comm, ierr)
      case (T_REAL)
        if (v) call MPI_Scatterv(ra, cnts, displs, ty, rb, mine, ty, root, comm, ierr)
        if (.not. v) call MPI_Scatter(ra, n, ty, rb, n, ty, root, comm, ierr)
      case default
        if (v) call MPI_Scatterv(da, cnts, displs, ty, db, mine, ty, root, comm, ierr)
        if (.not. v) call MPI_Scatter(da, n, ty, db, n, ty, root, comm, ierr)
      end select
      ia(1:mine) = ib(1:mine)
      ra(1:mine) = rb(1:mine)
      da(1:mine) = db(1:mine)
    end if
    call check_err(ierr, trim(what))
    do i = 1, mine
      ex(i) = val(csalt, me, i, t)
    end do
    call compare(trim(what), t, mine, root, inplace)
    deallocate (cnts, displs)
  end subroutine do_scatter
  ! MPI_Scan (ex false) or MPI_Exscan (ex true): ranks 0..me (0..me-1) in rank
  ! order; an exscan's rank 0 has no result
  subroutine do_scan(comm, t, o, n, inplace, ex_scan)
    integer, intent(in) :: comm, t, o, n
    logical, intent(in) :: inplace, ex_scan
    integer :: me, np, ierr, upto, ty
    character(len=12) :: what
    ncases = ncases + 1
    csalt = csalt + 1
    call MPI_Comm_rank(comm, me, ierr)
    call MPI_Comm_size(comm, np, ierr)
    call fill(t, me, n, 0, csalt)
    what = 'MPI_Scan'
    if (ex_scan) what = 'MPI_Exscan'
    ty = mpitype(t)
    if (.not. inplace) then
      ib(1:n) = ia(1:n)
      rb(1:n) = ra(1:n)
      db(1:n) = da(1:n)
    end if
    select case (t)
    case (T_INT)
      if (inplace .and. ex_scan) call MPI_Exscan(MPI_IN_PLACE, ia, n, ty, mpiop(o), comm, ierr)
      if (inplace .and. .not. ex_scan) call MPI_Scan(MPI_IN_PLACE, ia, n, ty, mpiop(o), comm, ierr)
      if (.not. inplace .and. ex_scan) call MPI_Exscan(ib, ia, n, ty, mpiop(o), comm, ierr)
      if (.not. inplace .and. .not. ex_scan) call MPI_Scan(ib, ia, n, ty, mpiop(o), comm, ierr)
    case (T_REAL)
      if (inplace .and. ex_scan) call MPI_Exscan(MPI_IN_PLACE, ra, n, ty, mpiop(o), comm, ierr)
      if (inplace .and. .not. ex_scan) call MPI_Scan(MPI_IN_PLACE, ra, n, ty, mpiop(o), comm, ierr)
      if (.not. inplace .and. ex_scan) call MPI_Exscan(rb, ra, n, ty, mpiop(o), comm, ierr)
      if (.not. inplace .and. .not. ex_scan) call MPI_Scan(rb, ra, n, ty, mpiop(o), comm, ierr)
    case default
      if (inplace .and. ex_scan) call MPI_Exscan(MPI_IN_PLACE, da, n, ty, mpiop(o), comm, ierr)
      if (inplace .and. .not. ex_scan) call MPI_Scan(MPI_IN_PLACE, da, n, ty, mpiop(o), comm, ierr)
      if (.not. inplace .and. ex_scan) call MPI_Exscan(db, da, n, ty, mpiop(o), comm, ierr)
      if (.not. inplace .and. .not. ex_scan) call MPI_Scan(db, da, n, ty, mpiop(o), comm, ierr)
    end select
    call check_err(ierr, trim(what))
    upto = me + 1
    if (ex_scan) upto = me
    if (upto > 0) then
      call reduce_expected(t, o, n, upto, 0)
      call compare(trim(what) // ' ' // oname(o), t, n, -1, inplace)
    end if
  end subroutine do_scan

  ! ---- nonblocking collectives (see the top of the file) ----

  subroutine nb_fail(what, detail, a, b)
    character(len=*), intent(in) :: what, detail
    integer, intent(in) :: a, b
    integer :: e
    write (0, '(a,i0,5a,i0,a,i0,3a,i0)') 'collcheck_f90: FAILED case ', ncases, ': ', what, ' ', &
         detail, ' ', a, ' expected ', b, ' comm=', trim(commname), ' world rank ', wrank
    call MPI_Abort(MPI_COMM_WORLD, 1, e)
  end subroutine nb_fail

  ! rank me's elements to rank r in MPI_Ialltoallv: n3 * mod(me + 2r, 3)
  pure integer function a2av_count(n3, from, to)
    integer, intent(in) :: n3, from, to
    a2av_count = n3 * mod(from + 2 * to, 3)
  end function a2av_count

  ! Fills the input of collective k (1..NB_OPS) of n integers into isend or
  ! ia (and the v-variants' arrays into nbcounts/nbdispls), and the elements
  ! of ia to compare afterwards into ex(1:nbm).
  subroutine nb_fill(comm, k, n, inplace)
    integer, intent(in) :: comm, k, n
    logical, intent(in) :: inplace
    integer :: me, np, ierr, r, i, root, total, n3, so, ro
    call MPI_Comm_rank(comm, me, ierr)
    call MPI_Comm_size(comm, np, ierr)
    root = mod(csalt, np)
    ia(1:max(1, n * np)) = -7
    nbm = 0
    select case (k)
    case (1)
      if (me == root) call fill(T_INT, me, n, 0, csalt)
      do i = 1, n
        ex(i) = val(csalt, root, i, T_INT)
      end do
      nbm = n
    case (2, 3)
      call fill(T_INT, me, n, 0, csalt)
      isend(1:n) = ia(1:n)
      call reduce_expected(T_INT, O_SUM, n, np, 0)
      nbm = n
      if (k == 3 .and. me /= root) nbm = 0
    case (4)
      do i = 1, n * np
        isend(i) = nint(val(csalt, me, i, T_INT))
      end do
      call reduce_expected(T_INT, O_SUM, n, np, me * n)
      nbm = n
    case (5)
      do i = 1, n
        isend(i) = nint(val(csalt, me, i, T_INT))
      end do
      if (inplace) ia(me * n + 1:me * n + n) = isend(1:n)
      do r = 0, np - 1
        do i = 1, n
          ex(r * n + i) = val(csalt, r, i, T_INT)
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
        isend(i) = nint(val(csalt, me, i, T_INT))
      end do
      do r = 0, np - 1
        do i = 1, nbcounts(r + 1)
          ex(nbdispls(r + 1) + i) = val(csalt, r, i, T_INT)
        end do
      end do
      nbm = total
    case (7)
      do r = 0, np - 1
        do i = 1, n
          isend(r * n + i) = nint(val(csalt + r, me, i, T_INT))
          ex(r * n + i) = val(csalt + me, r, i, T_INT)
        end do
      end do
      nbm = n * np
    case (8)                            ! sends in rank order, receives in reverse
      n3 = n / 3
      so = 0
      ro = 0
      do r = 0, np - 1
        nbcounts(r + 1) = a2av_count(n3, me, r)
        nbdispls(r + 1) = so
        so = so + nbcounts(r + 1)
        nbcounts(np + np - r) = a2av_count(n3, np - 1 - r, me)
        nbdispls(np + np - r) = ro
        ro = ro + nbcounts(np + np - r)
      end do
      do r = 0, np - 1
        do i = 1, nbcounts(r + 1)
          isend(nbdispls(r + 1) + i) = nint(val(csalt + r, me, i, T_INT))
        end do
        do i = 1, nbcounts(np + r + 1)
          ex(nbdispls(np + r + 1) + i) = val(csalt + me, r, i, T_INT)
        end do
      end do
      nbm = ro
    end select
  end subroutine nb_fill

  ! Starts collective k of n integers (nb_fill first); the v-variants' arrays
  ! stay valid in nbcounts/nbdispls until the request completes.
  subroutine nb_start(comm, k, n, inplace, req)
    integer, intent(in) :: comm, k, n
    logical, intent(in) :: inplace
    integer, intent(out) :: req
    integer :: me, np, ierr, root
    call MPI_Comm_rank(comm, me, ierr)
    call MPI_Comm_size(comm, np, ierr)
    root = mod(csalt, np)
    call nb_fill(comm, k, n, inplace)
    select case (k)
    case (1)
      call MPI_Ibcast(ia, n, MPI_INTEGER, root, comm, req, ierr)
    case (2)
      if (inplace) call MPI_Iallreduce(MPI_IN_PLACE, ia, n, MPI_INTEGER, MPI_SUM, comm, req, ierr)
      if (.not. inplace) call MPI_Iallreduce(isend, ia, n, MPI_INTEGER, MPI_SUM, comm, req, ierr)
    case (3)
      if (inplace .and. me == root) then
        call MPI_Ireduce(MPI_IN_PLACE, ia, n, MPI_INTEGER, MPI_SUM, root, comm, req, ierr)
      else
        call MPI_Ireduce(isend, ia, n, MPI_INTEGER, MPI_SUM, root, comm, req, ierr)
      end if
    case (4)
      call MPI_Ireduce_scatter_block(isend, ia, n, MPI_INTEGER, MPI_SUM, comm, req, ierr)
    case (5)
      if (inplace) call MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, ia, n, MPI_INTEGER, comm, req, ierr)
      if (.not. inplace) call MPI_Iallgather(isend, n, MPI_INTEGER, ia, n, MPI_INTEGER, comm, req, ierr)
    case (6)
      call MPI_Iallgatherv(isend, nbcounts(me + 1), MPI_INTEGER, ia, nbcounts, nbdispls, MPI_INTEGER, comm, &
           req, ierr)
    case (7)
      call MPI_Ialltoall(isend, n, MPI_INTEGER, ia, n, MPI_INTEGER, comm, req, ierr)
    case (8)
      call MPI_Ialltoallv(isend, nbcounts(1:np), nbdispls(1:np), MPI_INTEGER, ia, nbcounts(np + 1:2 * np), &
           nbdispls(np + 1:2 * np), MPI_INTEGER, comm, req, ierr)
    case default
      call MPI_Ibarrier(comm, req, ierr)
    end select
    call check_err(ierr, trim(nbname(k)))
  end subroutine nb_start

  ! The MPI's own MPI_Waitany and MPI_Waitsome on [MPI_REQUEST_NULL, a receive
  ! that can complete] (MPI_COMM_SELF), then on nulls only.
  subroutine calibrate()
    integer :: req(2), s, sts(MPI_STATUS_SIZE, 2), a(1), b(1), idx, n, ids(2), way, ierr
    a = 5
    do way = 1, 2
      req(1) = MPI_REQUEST_NULL
      call MPI_Isend(a, 1, MPI_INTEGER, 0, 7, MPI_COMM_SELF, s, ierr)
      call MPI_Irecv(b, 1, MPI_INTEGER, 0, 7, MPI_COMM_SELF, req(2), ierr)
      call MPI_Wait(s, MPI_STATUS_IGNORE, ierr)
      if (way == 1) then
        call MPI_Waitany(2, req, idx, sts(:, 1), ierr)
        any_off = idx - 2
        call MPI_Waitany(2, req, any_undef, sts(:, 1), ierr)
      else
        call MPI_Waitsome(2, req, n, ids, sts, ierr)
        some_off = ids(1) - 2
        call MPI_Waitsome(2, req, some_undef, ids, sts, ierr)
      end if
    end do
  end subroutine calibrate

  ! One case: collective k, the second collective and the ring outstanding,
  ! completed the way `how` says.
  subroutine do_nonblocking(comm, k, n, how, inplace)
    integer, intent(in) :: comm, k, n, how
    logical, intent(in) :: inplace
    integer :: me, np, ierr, i, r, left, right, idx, cnt, done, m2
    integer :: req(4), seen(4), ids(4), st(MPI_STATUS_SIZE), sts(MPI_STATUS_SIZE, 4)
    integer :: sring(3), rring(3), pr(3)
    logical :: flag, all_done
    ncases = ncases + 1
    csalt = csalt + 1
    call MPI_Comm_rank(comm, me, ierr)
    call MPI_Comm_size(comm, np, ierr)
    left = mod(me + np - 1, np)
    right = mod(me + 1, np)
    call nb_start(comm, k, n, inplace, req(1))
    ! the second collective: small (the MPI's own) or large (ours) by case
    m2 = 3
    if (mod(csalt, 2) == 0) m2 = N2
    do i = 1, m2
      s2(i) = nint(val(csalt + 3, me, i, T_INT))
    end do
    r2 = -7
    call MPI_Iallreduce(s2, r2, m2, MPI_INTEGER, MPI_SUM, comm, req(2), ierr)
    call check_err(ierr, 'MPI_Iallreduce (second)')
    sring = [me, csalt, 42]
    rring = -1
    call MPI_Irecv(rring, 3, MPI_INTEGER, left, 77, comm, req(3), ierr)
    call MPI_Isend(sring, 3, MPI_INTEGER, right, 77, comm, req(4), ierr)
    seen = 0
    select case (how)
    case (1)                            ! MPI_Wait each, the second collective first
      call MPI_Wait(req(2), st, ierr)
      call MPI_Wait(req(1), MPI_STATUS_IGNORE, ierr)
      call MPI_Wait(req(3), st, ierr)
      if (st(MPI_SOURCE) /= left) call nb_fail('MPI_Wait', 'ring status source', st(MPI_SOURCE), left)
      call MPI_Wait(req(4), MPI_STATUS_IGNORE, ierr)
    case (2)                            ! MPI_Waitall with statuses
      call MPI_Waitall(4, req, sts, ierr)
      if (sts(MPI_SOURCE, 3) /= left) call nb_fail('MPI_Waitall', 'ring status source', sts(MPI_SOURCE, 3), left)
    case (3)                            ! MPI_Test loops, in reverse order
      do i = 4, 1, -1
        flag = .false.
        do while (.not. flag)
          call MPI_Test(req(i), flag, st, ierr)
          call check_err(ierr, 'MPI_Test')
        end do
        if (i == 3 .and. st(MPI_SOURCE) /= left) call nb_fail('MPI_Test', 'ring status source', st(MPI_SOURCE), left)
      end do
    case (4)                            ! MPI_Testall loop
      all_done = .false.
      do while (.not. all_done)
        call MPI_Testall(4, req, all_done, MPI_STATUSES_IGNORE, ierr)
        call check_err(ierr, 'MPI_Testall')
      end do
    case (5, 6)                         ! MPI_Waitany (5) or MPI_Testany (6) loops
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
        if (idx < 1 .or. idx > 4) call nb_fail('MPI_Waitany/MPI_Testany', 'index', idx, 1)
        seen(idx) = seen(idx) + 1
        if (idx == 3 .and. st(MPI_SOURCE) /= left) call nb_fail('MPI_Waitany', 'ring status source', &
             st(MPI_SOURCE), left)
      end do
      call MPI_Waitany(4, req, idx, st, ierr)
      if (idx /= any_undef) call nb_fail('MPI_Waitany', 'index after all done', idx, any_undef)
    case (7, 8)                         ! MPI_Testsome (7) or MPI_Waitsome (8) loops
      done = 0
      do while (done < 4)
        if (how == 7) call MPI_Testsome(4, req, cnt, ids, sts, ierr)
        if (how == 8) call MPI_Waitsome(4, req, cnt, ids, sts, ierr)
        call check_err(ierr, 'MPI_Testsome/MPI_Waitsome')
        if (cnt == some_undef .or. cnt < 0 .or. cnt > 4) call nb_fail('MPI_Testsome', 'outcount', cnt, 4 - done)
        do i = 1, cnt
          ids(i) = ids(i) - some_off
          if (ids(i) < 1 .or. ids(i) > 4) call nb_fail('MPI_Testsome', 'index', ids(i), 1)
          seen(ids(i)) = seen(ids(i)) + 1
          if (ids(i) == 3 .and. sts(MPI_SOURCE, i) /= left) call nb_fail('MPI_Testsome', 'ring status source', &
               sts(MPI_SOURCE, i), left)
        end do
        done = done + cnt
      end do
      call MPI_Testsome(4, req, cnt, ids, sts, ierr)
      if (cnt /= some_undef) call nb_fail('MPI_Testsome', 'outcount after all done', cnt, some_undef)
    case (9)                            ! MPI_Request_get_status loop, then MPI_Waitall
      flag = .false.
      do while (.not. flag)
        call MPI_Request_get_status(req(1), flag, st, ierr)
        call check_err(ierr, 'MPI_Request_get_status')
      end do
      if (req(1) == MPI_REQUEST_NULL) call nb_fail('MPI_Request_get_status', 'freed the request', 0, 1)
      call MPI_Waitall(4, req, MPI_STATUSES_IGNORE, ierr)
    case default                        ! blocking point-to-point while the collectives are outstanding
      call MPI_Sendrecv(sring, 3, MPI_INTEGER, right, 78, pr, 3, MPI_INTEGER, left, 78, comm, st, ierr)
      if (pr(1) /= left .or. st(MPI_SOURCE) /= left) call nb_fail('MPI_Sendrecv', 'from', pr(1), left)
      if (np > 1) then                  ! a synchronous ring: rank 0 receives first
        if (me /= 0) call MPI_Ssend(sring, 3, MPI_INTEGER, right, 79, comm, ierr)
        call MPI_Probe(left, 79, comm, st, ierr)
        if (st(MPI_SOURCE) /= left) call nb_fail('MPI_Probe', 'source', st(MPI_SOURCE), left)
        call MPI_Recv(pr, 3, MPI_INTEGER, left, 79, comm, MPI_STATUS_IGNORE, ierr)
        if (me == 0) call MPI_Ssend(sring, 3, MPI_INTEGER, right, 79, comm, ierr)
        if (pr(1) /= left) call nb_fail('MPI_Probe/MPI_Recv', 'from', pr(1), left)
      end if
      call MPI_Waitall(4, req, sts, ierr)
    end select
    call check_err(ierr, 'completion')
    if (how >= 5 .and. how <= 8) then
      do i = 1, 4
        if (seen(i) /= 1) call nb_fail('MPI_Waitany/Testany/Testsome/Waitsome', 'times index seen', seen(i), 1)
      end do
    end if
    do i = 1, 4
      if (req(i) /= MPI_REQUEST_NULL) call nb_fail('completion', 'request left non-null, index', i, 0)
    end do
    if (rring(1) /= left .or. rring(2) /= csalt .or. rring(3) /= 42) &
         call nb_fail('ring MPI_Irecv', 'payload from', rring(1), left)
    do i = 1, m2
      r = 0
      do idx = 0, np - 1
        r = r + nint(val(csalt + 3, idx, i, T_INT))
      end do
      if (r2(i) /= r) call nb_fail('MPI_Iallreduce (second)', 'element', r2(i), r)
    end do
    call compare(trim(nbname(k)), T_INT, nbm, mod(csalt, np), inplace)
  end subroutine do_nonblocking

  ! ---- persistent collectives: MPI-4's MPI_<COLL>_INIT under MPICH, Open
  ! MPI 4.1's MPIX_<COLL>_INIT (its pcollreq extension); the program finds
  ! whichever the MPI has by name at run time (the preloaded libwanmpi's
  ! first), so it builds unchanged with both ----

  type(c_funptr) function init_named(coll)
    character(len=*), intent(in) :: coll
    init_named = c_dlsym(c_null_ptr, 'mpix_' // coll // '_init_' // c_null_char)
    if (.not. c_associated(init_named)) init_named = c_dlsym(c_null_ptr, 'mpi_' // coll // '_init_' // c_null_char)
    if (.not. c_associated(init_named)) call nb_fail('MPI_' // coll // '_init', 'not found, kind', 0, 1)
  end function init_named

  ! Persistent collective k (1..8) of n integers: initialized once, started
  ! three times with new input (MPI_Start + MPI_Wait, MPI_Startall + an
  ! MPI_Test loop, MPI_Start + MPI_Waitall), exact each time; the request
  ! stays allocated until MPI_Request_free.
  subroutine do_persistent(comm, k, n)
    integer, intent(in) :: comm, k, n
    procedure(bcast_init_t), pointer :: bcast_init
    procedure(allreduce_init_t), pointer :: allreduce_init
    procedure(reduce_init_t), pointer :: reduce_init
    procedure(allgather_init_t), pointer :: allgather_init
    procedure(allgatherv_init_t), pointer :: allgatherv_init
    procedure(alltoallv_init_t), pointer :: alltoallv_init
    integer :: me, np, ierr, root, req, round, one(1)
    logical :: flag
    character(len=40) :: what
    call MPI_Comm_rank(comm, me, ierr)
    call MPI_Comm_size(comm, np, ierr)
    csalt = csalt + 1
    root = mod(csalt, np)               ! csalt advances by np a round: the same root
    what = 'persistent ' // nbname(k)
    call nb_fill(comm, k, n, .false.)
    select case (k)
    case (1)
      call c_f_procpointer(init_named('bcast'), bcast_init)
      call bcast_init(ia, n, MPI_INTEGER, root, comm, MPI_INFO_NULL, req, ierr)
    case (2, 4)
      if (k == 2) call c_f_procpointer(init_named('allreduce'), allreduce_init)
      if (k == 4) call c_f_procpointer(init_named('reduce_scatter_block'), allreduce_init)
      call allreduce_init(isend, ia, n, MPI_INTEGER, MPI_SUM, comm, MPI_INFO_NULL, req, ierr)
    case (3)
      call c_f_procpointer(init_named('reduce'), reduce_init)
      call reduce_init(isend, ia, n, MPI_INTEGER, MPI_SUM, root, comm, MPI_INFO_NULL, req, ierr)
    case (5, 7)
      if (k == 5) call c_f_procpointer(init_named('allgather'), allgather_init)
      if (k == 7) call c_f_procpointer(init_named('alltoall'), allgather_init)
      call allgather_init(isend, n, MPI_INTEGER, ia, n, MPI_INTEGER, comm, MPI_INFO_NULL, req, ierr)
    case (6)
      call c_f_procpointer(init_named('allgatherv'), allgatherv_init)
      call allgatherv_init(isend, nbcounts(me + 1), MPI_INTEGER, ia, nbcounts, nbdispls, MPI_INTEGER, comm, &
           MPI_INFO_NULL, req, ierr)
    case default
      call c_f_procpointer(init_named('alltoallv'), alltoallv_init)
      call alltoallv_init(isend, nbcounts, nbdispls, MPI_INTEGER, ia, nbcounts(np + 1), nbdispls(np + 1), &
           MPI_INTEGER, comm, MPI_INFO_NULL, req, ierr)
    end select
    call check_err(ierr, trim(what) // ' init')
    do round = 1, 3
      ncases = ncases + 1
      if (round > 1) then
        csalt = csalt + np
        call nb_fill(comm, k, n, .false.)
      end if
      select case (round)
      case (1)
        call MPI_Start(req, ierr)
        call check_err(ierr, 'MPI_Start')
        call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
      case (2)
        one(1) = req
        call MPI_Startall(1, one, ierr)
        call check_err(ierr, 'MPI_Startall')
        flag = .false.
        do while (.not. flag)
          call MPI_Test(req, flag, MPI_STATUS_IGNORE, ierr)
          call check_err(ierr, 'MPI_Test')
        end do
      case default
        call MPI_Start(req, ierr)
        one(1) = req
        call MPI_Waitall(1, one, MPI_STATUSES_IGNORE, ierr)
        if (one(1) /= req) call nb_fail(trim(what), 'MPI_Waitall changed the handle', one(1), req)
      end select
      call check_err(ierr, trim(what) // ' completion')
      if (req == MPI_REQUEST_NULL) call nb_fail(trim(what), 'request freed by its completion, round', round, 0)
      call compare(trim(what), T_INT, nbm, root, .false.)
    end do
    call MPI_Request_free(req, ierr)
    call check_err(ierr, 'MPI_Request_free')
    if (req /= MPI_REQUEST_NULL) call nb_fail(trim(what), 'MPI_Request_free left the handle', req, 0)
  end subroutine do_persistent
end module collcheck_f90_mod

program collcheck_f90
  use mpi
  use collcheck_f90_mod
  implicit none
  integer, parameter :: NCOMM = 5
  integer :: ierr, wsize, color, ic, t, o, root, n, np, me, maxcount, nc, ip
  integer :: comms(NCOMM)
  character(len=40) :: names(NCOMM)
  integer :: counts(7) = [0, 1, 7, 1021, 4099, 65539, 262147]
  character(len=32) :: arg
  logical :: inplace

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, wrank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, wsize, ierr)
  call calibrate()
  maxcount = 65539
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *, iostat=ierr) maxcount
    if (ierr /= 0 .or. maxcount < 0) then
      if (wrank == 0) write (0, '(3a)') 'collcheck_f90: MAXCOUNT must be a count, not "', &
           trim(arg), '"'
      call MPI_Finalize(ierr)
      stop 2
    end if
  end if
  nc = count(counts <= maxcount)
  counts(1:nc) = pack(counts, counts <= maxcount)
  allocate (ia(max(1, maxcount * wsize)), ib(max(1, maxcount)), ra(max(1, maxcount * wsize)), &
       rb(max(1, maxcount)), da(max(1, maxcount * wsize)), db(max(1, maxcount)), &
       ex(max(1, maxcount * wsize)), isend(max(1, maxcount * wsize)), nbcounts(2 * wsize), &
       nbdispls(2 * wsize))

  ! communicators: world, a dup, an uneven split (about 3/8 and 5/8 of the
  ! ranks, spread over the rank range), the same split with reversed keys,
  ! and the world in reverse order
  comms(1) = MPI_COMM_WORLD
  names(1) = 'MPI_COMM_WORLD'
  call MPI_Comm_dup(MPI_COMM_WORLD, comms(2), ierr)
  names(2) = 'dup(world)'
  color = 0
  if (mod(wrank * 5 + 1, 8) < 3) color = 1
  call MPI_Comm_split(MPI_COMM_WORLD, color, wrank, comms(3), ierr)
  names(3) = 'split-uneven'
  call MPI_Comm_split(MPI_COMM_WORLD, color, -wrank, comms(4), ierr)
  names(4) = 'split-uneven-reversed-keys'
  call MPI_Comm_split(MPI_COMM_WORLD, 0, wsize - wrank, comms(5), ierr)
  names(5) = 'world-reversed'

  do ic = 1, NCOMM
    commname = names(ic)
    csalt = ic * 100000
    call MPI_Comm_rank(comms(ic), me, ierr)
    call MPI_Comm_size(comms(ic), np, ierr)
    do t = T_INT, T_DBL
      ! every root, with counts and operations cycling through the lists
      do root = 0, np - 1
        call do_bcast(comms(ic), t, counts(1 + mod(root + t, nc)), root)
        call do_reduce(comms(ic), t, 1 + mod(root + t, 3), counts(1 + mod(2 * root + t + 1, nc)), &
             root, mod(root, 2) == 0)
      end do
      do o = O_SUM, O_MIN
        do ip = 0, 1
          inplace = ip == 1
          call do_allreduce(comms(ic), t, o, counts(1 + mod(3 * o + ip + t, nc)), inplace)
          call do_scan(comms(ic), t, o, counts(1 + mod(3 * o + ip + t + 1, nc)), inplace, ip == 0)
          call do_scan(comms(ic), t, o, counts(1 + mod(3 * o + ip + t + 2, nc)), .not. inplace, ip == 1)
        end do
      end do
      do ip = 0, 1
        n = counts(1 + mod(2 * ip + t, nc))
        if (n > 65539) n = 65539
        call do_allgather(comms(ic), t, min(n, maxcount), ip == 1)
        call do_allgatherv(comms(ic), t, min(n, maxcount) / 3, ip == 1)
        call do_reduce_scatter(comms(ic), t, 1 + mod(ip + t, 3), min(n, maxcount) / 3, ip == 1)
      end do
      ! gather and scatter: every root, (v) with irregular blocks, in place at every other root
      do root = 0, np - 1
        n = min(counts(1 + mod(root + t, nc)), 65539, maxcount) / 3
        call do_gather(comms(ic), t, n, root, mod(root + t, 2) == 0, mod(root, 2) == 1)
        call do_scatter(comms(ic), t, n, root, mod(root + t, 2) == 1, mod(root, 2) == 0)
      end do
    end do
    ! nonblocking, on a communicator that has had blocking collectives (the
    ! cluster map is built there): 7 integers (the MPI's own, held by
    ! libwanmpi) and up to 12289 (ours from 8 KiB), every way of completing
    do ip = 0, 1
      n = 7
      if (ip == 1) n = min(maxcount, 12289)
      do o = 1, NB_OPS
        call do_nonblocking(comms(ic), o, n, 1 + mod(o + 3 * ic + 5 * ip, NB_WAYS), mod(o + ip, 2) == 0)
      end do
    end do
    ! persistent, large (ours) on the world and the split, small (the MPI's own) elsewhere
    n = 7
    if (ic == 1 .or. ic == 3) n = min(maxcount, 12289)
    do o = 1, NB_OPS - 1
      call do_persistent(comms(ic), o, n)
    end do
  end do

  do ic = 2, NCOMM
    call MPI_Comm_free(comms(ic), ierr)
  end do
  if (wrank == 0) write (*, '(a,i0,a)') 'collcheck_f90: ', ncases, ' cases ok'
  call MPI_Finalize(ierr)
end program collcheck_f90
