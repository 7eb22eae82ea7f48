program check_use_mpi
  use mpi
  implicit none
  character(len=*), parameter :: variant = 'fortran use mpi'
  integer :: req
  include 'check_body.inc'
end program check_use_mpi
