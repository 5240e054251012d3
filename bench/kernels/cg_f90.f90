! cg_f90: NAS CG's communication pattern in Fortran 90 (`use mpi`), the twin
! of cg.c: the same process grid, messages, compute phase and self-check, so
! that the suite also runs a grid kernel through the Fortran bindings.
!
!   cg_f90 [--class S|A|B] [--iters I]      (an even number of ranks)
!
! 2 rows of nranks/2 columns, rank = row * cols + col (with block placement
! on two clusters each row is a cluster). Per iteration: a local sparse
! matrix-vector product q = A p on `seg` rows (A symmetric, 15 nonzeros per
! row, diagonally dominant); the row reduction, log2(cols) exchanges of a
! segment with column col ^ 2^s of the same row; the transpose exchange of a
! segment (even columns with their mirror in the other row, across the WAN;
! odd columns with column col ^ 2 of their own row); two allreduces of dot
! products (p.q, r.r) that drive a CG update. Segment: S 2048 doubles
! (16 KiB), A 16384 (128 KiB), B 65536 (512 KiB). Checks: every received
! element (value() payload) and every allreduce (kernel_f.inc).
include 'kernel_f.inc'

module cg_f
  use kernel_f
  implicit none
  integer, parameter :: NOFF = 7
  integer(int64) :: seg
  integer :: cols, row, col
  double precision, allocatable :: p(:), q(:), r(:), x(:)
  double precision :: w(NOFF)
  integer(int64) :: off(NOFF)
  integer(int32), allocatable :: out(:), in(:)
contains

  subroutine matvec()
    double precision :: diag, s
    integer(int64) :: i
    integer :: k
    diag = 1d0
    do k = 1, NOFF
      diag = diag + 2 * abs(w(k))
    end do
    do i = 0, seg - 1
      s = diag * p(i)
      do k = 1, NOFF
        s = s + w(k) * (p(mod(i + off(k), seg)) + p(mod(i + seg - off(k), seg)))
      end do
      q(i) = s
    end do
  end subroutine matvec

  subroutine start()
    integer(int64) :: i
    do i = 0, seg - 1
      p(i) = 1d0 + dble(mod(value(rank, 0, 0, i), 1000_int64)) / 1000d0
      r(i) = p(i)
      x(i) = 0d0
    end do
  end subroutine start

  subroutine run(iters)
    integer, intent(in) :: iters
    integer :: half, transpose, it, key, s, c, peer, ierr
    integer(int64) :: n
    double precision :: rho(1), d(1), rr(1), alpha, beta
    half = nranks / 2
    if (mod(col, 2) == 0) then
      transpose = merge(rank - half, rank + half, row /= 0)
    else if (ieor(col, 2) < cols) then
      transpose = row * cols + ieor(col, 2)
    else
      transpose = MPI_PROC_NULL
    end if
    n = seg * 2                                         ! 32-bit elements per segment
    call start()
    rho(1) = sum(r * r)
    call allreduce_checked('rho', 0, rho, 1)
    do it = 0, iters - 1
      if (mod(it, 25) == 24) call start()               ! restart: keep the numbers tame
      call matvec()
      key = it * 32
      s = 1
      do while (s < cols)
        c = ieor(col, s)
        peer = merge(row * cols + c, MPI_PROC_NULL, c < cols)
        call exchange('row reduction', peer, peer, out, in, n, key)
        key = key + 1
        s = s * 2
      end do
      call exchange('transpose', transpose, transpose, out, in, n, key)
      d(1) = sum(p * q)
      call allreduce_checked('p.q', it * 2 + 1, d, 1)
      alpha = rho(1) / d(1)
      x = x + alpha * p
      r = r - alpha * q
      rr(1) = sum(r * r)
      call allreduce_checked('r.r', it * 2 + 2, rr, 1)
      beta = rr(1) / rho(1)
      rho(1) = rr(1)
      p = r + beta * p
      if (.not. (abs(rho(1)) <= huge(rho(1)))) then
        write (error_unit, '(a,i0,a,i0,a)') 'cg_f90: rank ', rank, ', iteration ', it, &
             ': the residual is not finite'
        flush (error_unit)
        call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
      end if
    end do
  end subroutine run
end module cg_f

program cg_f90
  use cg_f
  implicit none
  integer :: ierr, k
  double precision :: t0
  kusage_extra = ' (an even number of ranks)'
  call kernel_init('cg_f90', 25, 50, 50)
  if (mod(nranks, 2) /= 0) call usage('cg_f90 needs an even number of ranks')
  seg = by_class(2048_int64, 16384_int64, 65536_int64)
  cols = nranks / 2
  row = rank / cols
  col = mod(rank, cols)
  do k = 1, NOFF
    off(k) = 1 + mod(value(k - 1, 7, 1, 0_int64), seg / 2 - 1)
    w(k) = -0.05d0 * (1 + mod(k - 1, 3))
  end do
  allocate (p(0:seg - 1), q(0:seg - 1), r(0:seg - 1), x(0:seg - 1), out(seg * 2), in(seg * 2))
  call run(1)
  call PMPI_Barrier(MPI_COMM_WORLD, ierr)
  t0 = MPI_Wtime()
  call run(kiters)
  call kernel_report(MPI_Wtime() - t0)
end program cg_f90
