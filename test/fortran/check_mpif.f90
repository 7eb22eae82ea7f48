program check_mpif
  implicit none
  include 'mpif.h'
  character(len=*), parameter :: variant = 'fortran mpif.h'
  integer :: req
  include 'check_body.inc'
end program check_mpif
