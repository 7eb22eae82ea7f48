# NEXAR_CHECK_MPI: find an MPI and its compile/link flags.
#   --with-mpi=DIR  use DIR/bin/mpicc; otherwise mpicc on PATH.
# Sets MPI_CPPFLAGS, MPI_LDFLAGS, MPI_LIBS, MPICC, MPIRUN.
AC_DEFUN([NEXAR_CHECK_MPI], [
  AC_ARG_WITH([mpi],
    [AS_HELP_STRING([--with-mpi=DIR], [MPI installation prefix (default: mpicc on PATH)])],
    [], [with_mpi=check])
  AS_IF([test "x$with_mpi" = xno], [AC_MSG_ERROR([MPI is required: libnexar_pmpi wraps MPI_Allreduce])])
  AS_IF([test "x$with_mpi" = xcheck || test "x$with_mpi" = xyes],
    [AC_PATH_PROGS([MPICC], [mpicc])
     AC_PATH_PROGS([MPIRUN], [mpirun mpiexec])],
    [AC_PATH_PROGS([MPICC], [mpicc], [], [$with_mpi/bin])
     AC_PATH_PROGS([MPIRUN], [mpirun mpiexec], [], [$with_mpi/bin])])
  AS_IF([test -z "$MPICC"],
    [AC_MSG_ERROR([mpicc not found; install libopenmpi-dev openmpi-bin (Debian) or pass --with-mpi=DIR])])
  AC_MSG_CHECKING([MPI compile and link flags])
  dnl Open MPI answers --showme:*, MPICH answers -compile_info/-link_info.
  AS_IF([MPI_SHOW_C=`$MPICC --showme:compile 2>/dev/null` && MPI_SHOW_L=`$MPICC --showme:link 2>/dev/null`],
    [nexar_mpi_flavour="Open MPI"],
    [MPI_SHOW_C=`$MPICC -compile_info 2>/dev/null | cut -d' ' -f2-`
     MPI_SHOW_L=`$MPICC -link_info 2>/dev/null | cut -d' ' -f2-`
     nexar_mpi_flavour="MPICH-like"])
  MPI_CPPFLAGS=""
  for f in $MPI_SHOW_C; do case $f in -I*|-D*) MPI_CPPFLAGS="$MPI_CPPFLAGS $f";; esac; done
  MPI_LDFLAGS=""; MPI_LIBS=""
  for f in $MPI_SHOW_L; do
    case $f in -L*|-Wl,*) MPI_LDFLAGS="$MPI_LDFLAGS $f";; -l*) MPI_LIBS="$MPI_LIBS $f";; esac
  done
  AC_MSG_RESULT([$nexar_mpi_flavour: $MPI_CPPFLAGS $MPI_LDFLAGS $MPI_LIBS])
  nexar_save_CPPFLAGS="$CPPFLAGS"; nexar_save_LDFLAGS="$LDFLAGS"; nexar_save_LIBS="$LIBS"
  CPPFLAGS="$CPPFLAGS $MPI_CPPFLAGS -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX"
  LDFLAGS="$LDFLAGS $MPI_LDFLAGS"; LIBS="$MPI_LIBS $LIBS"
  AC_CHECK_HEADER([mpi.h], [], [AC_MSG_ERROR([mpi.h not usable with $MPI_CPPFLAGS])])
  AC_MSG_CHECKING([for PMPI_Allreduce])
  AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <mpi.h>]], [[return PMPI_Allreduce(0, 0, 0, MPI_INT, MPI_SUM, MPI_COMM_WORLD);]])],
    [AC_MSG_RESULT([yes])], [AC_MSG_RESULT([no]); AC_MSG_ERROR([the MPI library has no profiling interface (PMPI_Allreduce)])])
  CPPFLAGS="$nexar_save_CPPFLAGS"; LDFLAGS="$nexar_save_LDFLAGS"; LIBS="$nexar_save_LIBS"
  MPI_CPPFLAGS="$MPI_CPPFLAGS -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX"
  AS_IF([test -z "$MPIRUN"], [MPIRUN=mpirun])
  dnl The Fortran wrapper compiler, for the Fortran tests only.
  AC_PATH_PROGS([MPIFC], [mpifort mpif90], [], [`dirname $MPICC`:$PATH])
  AC_SUBST([MPIFC])
  AC_SUBST([MPI_CPPFLAGS]) AC_SUBST([MPI_LDFLAGS]) AC_SUBST([MPI_LIBS]) AC_SUBST([MPIRUN])
  nexar_mpi_summary="$nexar_mpi_flavour ($MPICC)"
])
