# NEXAR_CHECK_MPI: find an MPI, its compile/link flags, and its launcher.
#   MPICC=NAME|PATH  the MPI's C compiler wrapper (mpicc.mpich: Debian's MPICH)
#   --with-mpi=DIR   use DIR/bin/mpicc; otherwise mpicc on PATH.
# The launcher for the tests (MPIRUN) and the Fortran wrapper (MPIFC) come
# from the same MPI: next to MPICC, with its suffix (mpicc.mpich ->
# mpiexec.mpich, mpifort.mpich), and the launcher is checked to be that
# MPI's (another MPI's launcher cannot start its programs as one job).
# Sets MPI_CPPFLAGS, MPI_LDFLAGS, MPI_LIBS, MPICC, MPIRUN, MPIFC, MPI_FAMILY
# (openmpi or mpich).
AC_DEFUN([NEXAR_CHECK_MPI], [
  AC_ARG_WITH([mpi],
    [AS_HELP_STRING([--with-mpi=DIR], [MPI installation prefix (default: mpicc on PATH; or set MPICC)])],
    [], [with_mpi=check])
  AC_ARG_VAR([MPICC], [MPI C compiler wrapper, a name or a path (default: mpicc; Debian's MPICH: mpicc.mpich)])
  AC_ARG_VAR([MPIRUN], [MPI launcher for the tests (default: the one of MPICC's MPI)])
  AC_ARG_VAR([MPIFC], [MPI Fortran wrapper for the Fortran tests (default: the one of MPICC's MPI)])
  AS_IF([test "x$with_mpi" = xno], [AC_MSG_ERROR([MPI is required: libnexar_pmpi wraps MPI_Allreduce])])
  nexar_mpi_path=$PATH
  AS_IF([test "x$with_mpi" != xcheck && test "x$with_mpi" != xyes], [nexar_mpi_path=$with_mpi/bin])
  dnl A bare name (MPICC=mpicc.mpich) is looked up; AC_PATH_PROGS keeps only absolute paths.
  nexar_mpicc_name=${MPICC:-mpicc}
  case $nexar_mpicc_name in /*) ;; *) unset MPICC ac_cv_path_MPICC ;; esac
  AC_PATH_PROGS([MPICC], [$nexar_mpicc_name], [], [$nexar_mpi_path])
  AS_IF([test -z "$MPICC"],
    [AC_MSG_ERROR([$nexar_mpicc_name not found; install libopenmpi-dev openmpi-bin (Debian), or mpich libmpich-dev and pass MPICC=mpicc.mpich, or pass --with-mpi=DIR])])
  nexar_mpi_bin=`dirname "$MPICC"`
  nexar_mpi_suffix=`basename "$MPICC" | sed 's/^mpicc//'`
  AC_MSG_CHECKING([MPI compile and link flags])
  dnl Open MPI answers --showme:*, MPICH answers -compile_info/-link_info.
  AS_IF([MPI_SHOW_C=`$MPICC --showme:compile 2>/dev/null` && MPI_SHOW_L=`$MPICC --showme:link 2>/dev/null`],
    [nexar_mpi_flavour="Open MPI"; MPI_FAMILY=openmpi],
    [MPI_SHOW_C=`$MPICC -compile_info 2>/dev/null | cut -d' ' -f2-`
     MPI_SHOW_L=`$MPICC -link_info 2>/dev/null | cut -d' ' -f2-`
     nexar_mpi_flavour="MPICH"; MPI_FAMILY=mpich])
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
  dnl The launcher: the same MPI's, next to MPICC first.
  AS_IF([test $MPI_FAMILY = openmpi],
    [nexar_launchers="mpirun$nexar_mpi_suffix mpiexec$nexar_mpi_suffix"; nexar_launcher_says='Open MPI\|OpenRTE'],
    [nexar_launchers="mpiexec$nexar_mpi_suffix mpirun$nexar_mpi_suffix"; nexar_launcher_says='HYDRA\|MPICH'])
  AC_PATH_PROGS([MPIRUN], [$nexar_launchers], [], [$nexar_mpi_bin:$nexar_mpi_path])
  AS_IF([test -z "$MPIRUN"],
    [AC_MSG_ERROR([no launcher of $nexar_mpi_flavour found ($nexar_launchers); pass MPIRUN=...])])
  AC_MSG_CHECKING([that $MPIRUN is $nexar_mpi_flavour's launcher])
  AS_IF([$MPIRUN --version 2>&1 | grep -q "$nexar_launcher_says"],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no])
     AC_MSG_ERROR([$MPIRUN is not $nexar_mpi_flavour's launcher ($MPICC): it cannot start these programs as one job. Pass MPIRUN= the launcher of the same MPI])])
  dnl The Fortran wrapper compiler, for the Fortran tests only.
  AC_PATH_PROGS([MPIFC], [mpifort$nexar_mpi_suffix mpif90$nexar_mpi_suffix], [], [$nexar_mpi_bin:$nexar_mpi_path])
  AC_SUBST([MPIFC])
  AC_SUBST([MPI_CPPFLAGS]) AC_SUBST([MPI_LDFLAGS]) AC_SUBST([MPI_LIBS]) AC_SUBST([MPIRUN]) AC_SUBST([MPI_FAMILY])
  nexar_mpi_summary="$nexar_mpi_flavour ($MPICC)"
])
