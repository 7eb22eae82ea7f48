# NEXAR_CHECK_CUDA: look for the CUDA toolkit (nvcc).
#   --with-cuda=DIR  toolkit prefix (default: /usr/local/cuda, then nvcc on PATH); --without-cuda disables.
# Defines the conditional HAVE_CUDA and NVCC.  The device-buffer path itself is
# built by a later milestone; today the toolkit is only detected and reported.
AC_DEFUN([NEXAR_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda=DIR], [CUDA toolkit prefix (default: /usr/local/cuda or nvcc on PATH); --without-cuda to disable])],
    [], [with_cuda=check])
  nexar_have_cuda=no; NVCC=""; CUDA_DIR=""
  AS_CASE(["$with_cuda"],
    [no], [],
    [check|yes], [
      AS_IF([test -x /usr/local/cuda/bin/nvcc], [CUDA_DIR=/usr/local/cuda],
        [AC_PATH_PROG([nexar_nvcc_on_path], [nvcc])
         AS_IF([test -n "$nexar_nvcc_on_path"], [CUDA_DIR=`dirname \`dirname $nexar_nvcc_on_path\``])])],
    [CUDA_DIR="$with_cuda"])
  AS_IF([test -n "$CUDA_DIR" && test -x "$CUDA_DIR/bin/nvcc"], [nexar_have_cuda=yes; NVCC="$CUDA_DIR/bin/nvcc"],
    [AS_IF([test "x$with_cuda" != xcheck && test "x$with_cuda" != xno],
      [AC_MSG_ERROR([--with-cuda=$with_cuda given but no nvcc found there])])])
  AC_SUBST([NVCC]) AC_SUBST([CUDA_DIR])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$nexar_have_cuda" = xyes])
  AS_IF([test "x$nexar_have_cuda" = xyes],
    [nexar_cuda_summary="toolkit found in $CUDA_DIR (device-buffer path not built yet: host buffers only)"],
    [nexar_cuda_summary="no (host buffers only)"])
])
