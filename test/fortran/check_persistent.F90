! Fortran persistent collectives (mpif.h): MPI-4's MPI_Allreduce_init, or
! Open MPI 4's MPIX_Allreduce_init (ALLREDUCE_INIT, chosen by
! run-fortran-tests.sh), out of place and in place, each started three
! times with new input, then freed.  Values are small integers, so every
! result is exact and known.
program check_persistent
  implicit none
  include 'mpif.h'
  integer, parameter :: n = 262147
  integer :: rank, nranks, ierr, i, k, errors, req, req2
  integer, allocatable :: a(:), b(:)
  double precision, allocatable :: x(:)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  allocate(a(n), b(n), x(n))
  errors = 0

  call ALLREDUCE_INIT(a, b, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, req, ierr)
  if (ierr /= MPI_SUCCESS) errors = errors + 1
  call ALLREDUCE_INIT(MPI_IN_PLACE, x, n, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, req2, ierr)
  if (ierr /= MPI_SUCCESS) errors = errors + 1
  do k = 1, 3
    do i = 1, n
      a(i) = rank * k + mod(i, 1000)
      x(i) = 0.5d0 * rank * k + mod(i, 7)
    end do
    call MPI_Start(req, ierr)
    if (ierr /= MPI_SUCCESS) errors = errors + 1
    call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
    if (ierr /= MPI_SUCCESS) errors = errors + 1
    call MPI_Start(req2, ierr)
    if (ierr /= MPI_SUCCESS) errors = errors + 1
    call MPI_Wait(req2, MPI_STATUS_IGNORE, ierr)
    if (ierr /= MPI_SUCCESS) errors = errors + 1
    do i = 1, n
      if (b(i) /= k * nranks * (nranks - 1) / 2 + nranks * mod(i, 1000)) errors = errors + 1
      if (x(i) /= 0.25d0 * k * nranks * (nranks - 1) + nranks * mod(i, 7)) errors = errors + 1
    end do
  end do
  call MPI_Request_free(req, ierr)
  if (ierr /= MPI_SUCCESS) errors = errors + 1
  call MPI_Request_free(req2, ierr)
  if (ierr /= MPI_SUCCESS) errors = errors + 1

  call MPI_Allreduce(MPI_IN_PLACE, errors, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a,i0,a,i0)', 'fortran persistent: ranks=', nranks, ' errors=', errors
  deallocate(a, b, x)
  call MPI_Finalize(ierr)
  if (errors /= 0) stop 1
end program check_persistent
