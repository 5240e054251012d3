! alltoallw_f90: the Fortran MPI_ALLTOALLW, MPI_IALLTOALLW and
! MPI_ALLTOALLW_INIT (Open MPI 4.1: MPIX_ALLTOALLW_INIT, found by name at
! run time as in collcheck_f90) reach libwanmpi and are exact.
!
! Every rank sends every rank (src + dst) mod 3 x 5000 integers (zero,
! 5000 or 10000: blocks under and past WANMPI_CHUNK), the ints naming
! (source, destination, position, round), at byte displacements, each
! peer's block as MPI_INTEGER on the send side and as a contiguous type of 5
! integers on the receive side (an array of datatype handles converted one
! by one). Rounds: 1 blocking; 2 nonblocking, completed by MPI_WAIT; 3 and
! 4 one persistent request started twice (MPI_WAIT), then freed. Rank 0
! prints "alltoallw_f90: ok"; a wrong value: stop 1.
module alltoallw_f90_mod
  use, intrinsic :: iso_c_binding, only: c_associated, c_char, c_f_procpointer, c_funptr, c_null_char, &
       c_null_ptr, c_ptr
  implicit none
  abstract interface
    subroutine alltoallw_init_t(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, comm, info, &
         req, ierr)
      integer :: sbuf(*), scounts(*), sdispls(*), stypes(*), rbuf(*), rcounts(*), rdispls(*), rtypes(*), &
           comm, info, req, ierr
    end subroutine alltoallw_init_t
  end interface
  interface
    type(c_funptr) function c_dlsym(handle, name) bind(C, name='dlsym')
      import :: c_ptr, c_funptr, c_char
      type(c_ptr), value :: handle
      character(kind=c_char), intent(in) :: name(*)
    end function c_dlsym
  end interface
contains
  integer function value(src, dst, i, round)
    integer, intent(in) :: src, dst, i, round
    value = src * 1000003 + dst * 7919 + i * 31 + round * 17
  end function value

  type(c_funptr) function init_named()
    init_named = c_dlsym(c_null_ptr, 'mpix_alltoallw_init_' // c_null_char)
    if (.not. c_associated(init_named)) init_named = c_dlsym(c_null_ptr, 'mpi_alltoallw_init_' // c_null_char)
  end function init_named
end module alltoallw_f90_mod

program alltoallw_f90
  use mpi
  use alltoallw_f90_mod
  implicit none
  integer :: ierr, me, n, p, i, c5, bad, allbad, round, req
  integer, allocatable :: scounts(:), sdispls(:), stypes(:), rcounts(:), rdispls(:), rtypes(:)
  integer, allocatable :: sbuf(:), rbuf(:)
  integer, parameter :: most = 10000
  procedure(alltoallw_init_t), pointer :: alltoallw_init

  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, me, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, n, ierr)
  call MPI_TYPE_CONTIGUOUS(5, MPI_INTEGER, c5, ierr)
  call MPI_TYPE_COMMIT(c5, ierr)
  allocate(scounts(0:n-1), sdispls(0:n-1), stypes(0:n-1), rcounts(0:n-1), rdispls(0:n-1), rtypes(0:n-1))
  allocate(sbuf(n * most), rbuf(n * most))
  do p = 0, n - 1
    scounts(p) = mod(me + p, 3) * 5000
    sdispls(p) = p * most * 4
    stypes(p) = MPI_INTEGER
    rcounts(p) = mod(p + me, 3) * 1000
    rdispls(p) = p * most * 4
    rtypes(p) = c5
  end do
  if (.not. c_associated(init_named())) then
    print '(a)', 'alltoallw_f90: neither mpix_alltoallw_init_ nor mpi_alltoallw_init_ found'
    stop 2
  end if
  call c_f_procpointer(init_named(), alltoallw_init)
  bad = 0
  do round = 1, 4
    call fill(round)
    select case (round)
    case (1)
      call MPI_ALLTOALLW(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, MPI_COMM_WORLD, ierr)
    case (2)
      call MPI_IALLTOALLW(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, MPI_COMM_WORLD, req, &
           ierr)
      if (ierr == MPI_SUCCESS) call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
    case (3)
      call alltoallw_init(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, MPI_COMM_WORLD, &
           MPI_INFO_NULL, req, ierr)
      if (ierr == MPI_SUCCESS) call MPI_START(req, ierr)
      if (ierr == MPI_SUCCESS) call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
    case default
      call MPI_START(req, ierr)
      if (ierr == MPI_SUCCESS) call MPI_WAIT(req, MPI_STATUS_IGNORE, ierr)
      if (ierr == MPI_SUCCESS) call MPI_REQUEST_FREE(req, ierr)
    end select
    if (ierr /= MPI_SUCCESS) bad = bad + 1
    call check(round)
  end do
  call MPI_ALLREDUCE(bad, allbad, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (allbad /= 0) then
    if (me == 0) print '(a, i0, a)', 'alltoallw_f90: ', allbad, ' wrong values'
    call MPI_FINALIZE(ierr)
    stop 1
  end if
  if (me == 0) print '(a)', 'alltoallw_f90: ok'
  call MPI_TYPE_FREE(c5, ierr)
  call MPI_FINALIZE(ierr)
contains
  subroutine fill(round)
    integer, intent(in) :: round
    do p = 0, n - 1
      do i = 1, scounts(p)
        sbuf(p * most + i) = value(me, p, i, round)
      end do
    end do
    rbuf = -1
  end subroutine fill

  subroutine check(round)
    integer, intent(in) :: round
    do p = 0, n - 1
      do i = 1, most
        if (i <= rcounts(p) * 5) then
          if (rbuf(p * most + i) /= value(p, me, i, round)) bad = bad + 1
        else if (rbuf(p * most + i) /= -1) then
          bad = bad + 1
        end if
      end do
    end do
  end subroutine check
end program alltoallw_f90
