! ep_f90: NAS EP's pattern in Fortran 90 (`use mpi`), the twin of ep.c: the
! same pairs, the same counts and the same self-check, so that the suite
! also runs a Fortran program (libwanmpi must catch mpi_allreduce_ and
! mpi_gather_ from the Fortran bindings).
!
!   ep_f90 [--class S|A|B] [--iters I]
!
! Per iteration the ranks share 2^k pairs of uniform numbers in (-1, 1)
! (S k = 20, A 24, B 26; 4 iterations by default) from a counter-based
! generator (splitmix64 of the global index: the result does not depend on
! the number of ranks). Pairs inside the unit circle become Gaussian
! deviates (Marsaglia's polar method), counted in ten square annuli and
! summed in fixed point (2^-24). One MPI_Allreduce of 12 64-bit integers;
! check: it equals the sum of the per-rank values gathered to rank 0
! (MPI_Gather), exactly, and about pi/4 of the pairs were accepted.
! splitmix64 needs wrapping 64-bit multiplication: built with -fwrapv.
include 'kernel_f.inc'

module ep_f
  use kernel_f
  implicit none
  integer, parameter :: NQ = 10
  double precision, parameter :: FIX = 16777216d0               ! 2^24: fixed point of the sums
  double precision, parameter :: PI = 3.14159265358979323846d0
  integer(int64) :: pairs
contains

  integer(int64) function splitmix(i)
    integer(int64), intent(in) :: i
    integer(int64) :: z
    z = i - 7046029254386353131_int64                            ! + 0x9e3779b97f4a7c15
    z = ieor(z, shiftr(z, 30)) * (-4658895280553007687_int64)    ! 0xbf58476d1ce4e5b9
    z = ieor(z, shiftr(z, 27)) * (-7723592293110705685_int64)    ! 0x94d049bb133111eb
    splitmix = ieor(z, shiftr(z, 31))
  end function splitmix

  double precision function uniform(i)                          ! in (-1, 1)
    integer(int64), intent(in) :: i
    uniform = (dble(shiftr(splitmix(i), 11)) + 0.5d0) / 4503599627370496d0 - 1d0   ! / 2^52
  end function uniform

  subroutine run(iters)
    integer, intent(in) :: iters
    integer(int64) :: mine(NQ + 2), total(NQ + 2), want, accepted, lo, hi, base, j
    integer(int64), allocatable :: each(:, :)
    double precision :: x, y, t, f, gx, gy, ratio
    integer :: it, k, p, l, ierr
    allocate (each(NQ + 2, 0:merge(nranks - 1, 0, rank == 0)))
    do it = 0, iters - 1
      mine = 0
      lo = pairs * rank / nranks
      hi = pairs * (rank + 1) / nranks
      base = int(it, int64) * pairs
      do j = lo, hi - 1
        x = uniform(2 * (base + j))
        y = uniform(2 * (base + j) + 1)
        t = x * x + y * y
        if (t > 1d0 .or. t == 0d0) cycle
        f = sqrt(-2d0 * log(t) / t)
        gx = x * f
        gy = y * f
        l = int(max(abs(gx), abs(gy)))
        if (l < NQ) then
          mine(l + 1) = mine(l + 1) + 1
        else
          mine(NQ) = mine(NQ) + 1
        end if
        mine(NQ + 1) = mine(NQ + 1) + nint(gx * FIX, int64)
        mine(NQ + 2) = mine(NQ + 2) + nint(gy * FIX, int64)
      end do
      call MPI_Allreduce(mine, total, NQ + 2, MPI_INTEGER8, MPI_SUM, MPI_COMM_WORLD, ierr)
      call MPI_Gather(mine, NQ + 2, MPI_INTEGER8, each, NQ + 2, MPI_INTEGER8, 0, MPI_COMM_WORLD, ierr)
      if (rank == 0) then
        accepted = 0
        do k = 1, NQ + 2
          want = 0
          do p = 0, nranks - 1
            want = want + each(k, p)
          end do
          if (total(k) /= want) then
            write (error_unit, '(a,i0,a,i0,a,i0,a,i0)') 'ep_f90 allreduce: iteration ', it, ', value ', k - 1, &
                 ': got ', total(k), ', the ranks'' sum is ', want
            flush (error_unit)
            call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
          end if
          if (k <= NQ) accepted = accepted + total(k)
        end do
        ratio = dble(accepted) / dble(pairs)
        if (abs(ratio - PI / 4) > 0.01d0) then
          write (error_unit, '(a,i0,a,i0,a,i0,a)') 'ep_f90 counts: iteration ', it, ': ', accepted, ' of ', &
               pairs, ' pairs accepted (want about pi/4)'
          flush (error_unit)
          call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
        end if
      end if
    end do
    deallocate (each)
  end subroutine run
end module ep_f

program ep_f90
  use ep_f
  implicit none
  integer :: ierr
  double precision :: t0
  call kernel_init('ep_f90', 4, 4, 4)
  pairs = shiftl(1_int64, int(by_class(20_int64, 24_int64, 26_int64)))
  call run(1)
  call PMPI_Barrier(MPI_COMM_WORLD, ierr)
  t0 = MPI_Wtime()
  call run(kiters)
  call kernel_report(MPI_Wtime() - t0)
end program ep_f90
