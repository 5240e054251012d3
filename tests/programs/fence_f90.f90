! fence_f90: tests/programs/fence.c from Fortran (the mpi module): does
! MPI_Finalize wait for every rank? Rank 0 sleeps SECONDS (argument 1, whole
! seconds) after a barrier; every rank prints how long after the barrier its
! MPI_Finalize returned, as {"rank": R, "finalize_returned_after_s": T}.
program fence_f90
  use mpi
  implicit none
  integer :: ierr, rank, wait_s
  integer(kind=8) :: t0, t1, rate
  character(len=16) :: arg
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  wait_s = 1
  if (command_argument_count() > 0) then
     call get_command_argument(1, arg)
     read (arg, *) wait_s
  end if
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call system_clock(t0, rate)
  if (rank == 0) call sleep(wait_s)
  call MPI_Finalize(ierr)
  call system_clock(t1)
  write (*, '(a,i0,a,f8.3,a)') '{"rank": ', rank, ', "finalize_returned_after_s": ', &
       real(t1 - t0, 8) / real(rate, 8), '}'
end program fence_f90
