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
! Usage: collcheck_f90 [MAXCOUNT]   (largest count, default 65539; the
! counts are 0, 1, 7, 1021, 4099, 65539 and 262147, up to MAXCOUNT)
! Rank 0 prints "collcheck_f90: N cases ok"; a mismatch is described on
! stderr and the job ends with MPI_Abort.
module collcheck_f90_mod
  use mpi
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
       ex(max(1, maxcount * wsize)))

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
      end do
      ! gather and scatter: every root, (v) with irregular blocks, in place at every other root
      do root = 0, np - 1
        n = min(counts(1 + mod(root + t, nc)), 65539, maxcount) / 3
        call do_gather(comms(ic), t, n, root, mod(root + t, 2) == 0, mod(root, 2) == 1)
        call do_scatter(comms(ic), t, n, root, mod(root + t, 2) == 1, mod(root, 2) == 0)
      end do
    end do
  end do

  do ic = 2, NCOMM
    call MPI_Comm_free(comms(ic), ierr)
  end do
  if (wrank == 0) write (*, '(a,i0,a)') 'collcheck_f90: ', ncases, ' cases ok'
  call MPI_Finalize(ierr)
end program collcheck_f90
