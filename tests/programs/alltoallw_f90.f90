! alltoallw_f90: the Fortran MPI_ALLTOALLW reaches libwanmpi and is exact.
!
! Every rank sends every rank (src + dst) mod 3 x 5000 integers (zero,
! 5000 or 10000: blocks under and past WANMPI_CHUNK), the ints naming
! (source, destination, position), at byte displacements, each peer's
! block as MPI_INTEGER on the send side and as a contiguous type of 5
! integers on the receive side (an array of datatype handles converted one
! by one). Rank 0 prints "alltoallw_f90: ok"; a wrong value: stop 1.
program alltoallw_f90
  use mpi
  implicit none
  integer :: ierr, me, n, p, i, c5, bad, allbad
  integer, allocatable :: scounts(:), sdispls(:), stypes(:), rcounts(:), rdispls(:), rtypes(:)
  integer, allocatable :: sbuf(:), rbuf(:)
  integer, parameter :: most = 10000

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
    do i = 1, scounts(p)
      sbuf(p * most + i) = value(me, p, i)
    end do
  end do
  rbuf = -1
  call MPI_ALLTOALLW(sbuf, scounts, sdispls, stypes, rbuf, rcounts, rdispls, rtypes, MPI_COMM_WORLD, ierr)
  bad = 0
  if (ierr /= MPI_SUCCESS) bad = 1
  do p = 0, n - 1
    do i = 1, most
      if (i <= rcounts(p) * 5) then
        if (rbuf(p * most + i) /= value(p, me, i)) bad = bad + 1
      else if (rbuf(p * most + i) /= -1) then
        bad = bad + 1
      end if
    end do
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
  integer function value(src, dst, i)
    integer, intent(in) :: src, dst, i
    value = src * 1000003 + dst * 7919 + i * 31
  end function value
end program alltoallw_f90
