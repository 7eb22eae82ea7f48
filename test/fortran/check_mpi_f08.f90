program check_mpi_f08
  use mpi_f08
  implicit none
  character(len=*), parameter :: variant = 'fortran use mpi_f08'
  type(MPI_Request) :: req
  include 'check_body.inc'
end program check_mpi_f08
