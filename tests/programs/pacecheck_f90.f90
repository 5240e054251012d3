! pacecheck_f90: the pacing attributes from Fortran (mpi module).
! WANMPI_KEYVALS gives the keyvals; MPI_COMM_GET_ATTR / MPI_COMM_SET_ATTR /
! MPI_ATTR_GET / MPI_ATTR_PUT / MPI_COMM_DELETE_ATTR pass the values (KB/s)
! themselves; WANMPI_SET_SENDERS sets MATB = B / n; bad values return an
! error. Prints "pacecheck_f90: ok" on rank 0, stops with code 1 otherwise.
program pacecheck_f90
  use mpi
  implicit none
  integer :: ierr, rank, kmax, kmatb, ival, errclass
  integer(kind=MPI_ADDRESS_KIND) :: val, b, start
  logical :: flag

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
  call wanmpi_keyvals(kmax, kmatb, ierr)
  call check(ierr == MPI_SUCCESS .and. kmax /= kmatb, 'wanmpi_keyvals')

  call MPI_Comm_get_attr(MPI_COMM_WORLD, kmax, b, flag, ierr)
  call check(ierr == MPI_SUCCESS .and. flag .and. b > 0, 'get WANMPI_MAXRATE')
  call MPI_Comm_get_attr(MPI_COMM_WORLD, kmatb, start, flag, ierr)
  call check(ierr == MPI_SUCCESS .and. flag, 'get WANMPI_MATB')

  val = 3000
  call MPI_Comm_set_attr(MPI_COMM_WORLD, kmatb, val, ierr)
  call check(ierr == MPI_SUCCESS, 'set WANMPI_MATB 3000')
  call MPI_Comm_get_attr(MPI_COMM_WORLD, kmatb, val, flag, ierr)
  call check(val == 3000, 'WANMPI_MATB reads back 3000')

  ival = 4000
  call MPI_Attr_put(MPI_COMM_WORLD, kmatb, ival, ierr)
  call check(ierr == MPI_SUCCESS, 'MPI_Attr_put WANMPI_MATB 4000')
  ival = 0
  call MPI_Attr_get(MPI_COMM_WORLD, kmatb, ival, flag, ierr)
  call check(ival == 4000 .and. flag, 'MPI_Attr_get WANMPI_MATB reads back 4000')

  val = -1
  call MPI_Comm_set_attr(MPI_COMM_WORLD, kmatb, val, ierr)
  call MPI_Error_class(ierr, errclass, ival)
  call check(ierr /= MPI_SUCCESS .and. errclass == MPI_ERR_ARG, 'a negative rate is refused')
  val = 5
  call MPI_Comm_set_attr(MPI_COMM_WORLD, kmax, val, ierr)
  call MPI_Error_class(ierr, errclass, ival)
  call check(ierr /= MPI_SUCCESS .and. errclass == MPI_ERR_KEYVAL, 'WANMPI_MAXRATE is read-only')

  call wanmpi_set_senders(MPI_COMM_WORLD, 4, ierr)
  call check(ierr == MPI_SUCCESS, 'wanmpi_set_senders 4')
  call MPI_Comm_get_attr(MPI_COMM_WORLD, kmatb, val, flag, ierr)
  call check(val == (b + 3) / 4, 'MATB = B / 4')
  call wanmpi_set_senders(MPI_COMM_WORLD, 0, ierr)
  call check(ierr /= MPI_SUCCESS, 'wanmpi_set_senders 0 is refused')

  call MPI_Comm_delete_attr(MPI_COMM_WORLD, kmatb, ierr)
  call MPI_Comm_get_attr(MPI_COMM_WORLD, kmatb, val, flag, ierr)
  call check(ierr == MPI_SUCCESS .and. val == start, 'delete: back to the start rate')

  ! another keyval still reaches the MPI library
  call MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, val, flag, ierr)
  call check(ierr == MPI_SUCCESS .and. flag .and. val >= 32767, 'MPI_TAG_UB still works')

  if (rank == 0) print '(a)', 'pacecheck_f90: ok'
  call MPI_Finalize(ierr)
contains
  subroutine check(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    integer :: e
    if (.not. ok) then
      print '(a,i0,2a)', 'pacecheck_f90: rank ', rank, ': FAIL ', what
      call MPI_Abort(MPI_COMM_WORLD, 1, e)
    end if
  end subroutine check
end program pacecheck_f90
