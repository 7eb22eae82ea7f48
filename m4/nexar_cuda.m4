# NEXAR_CHECK_CUDA: look for the CUDA toolkit (nvcc).
#   --with-cuda=DIR  toolkit prefix (default: /usr/local/cuda, then nvcc on PATH); --without-cuda disables.
#   --with-nvcc-gencode="-gencode ..."  GPU architectures to build for.
# Defines the conditional HAVE_CUDA, NVCC, CUDA_DIR and NVCC_GENCODE.  With
# CUDA, the plugin libnexar_pmpi_cuda.so (kernels + device API) is built; the
# main library never links CUDA either way.
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
  AC_ARG_WITH([nvcc-gencode],
    [AS_HELP_STRING([--with-nvcc-gencode=FLAGS],
      [nvcc -gencode flags (default: SASS for sm_80 and sm_90 (Hopper), PTX for compute_75 and compute_90)])],
    [NVCC_GENCODE="$withval"],
    [NVCC_GENCODE="-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 -gencode arch=compute_75,code=compute_75 -gencode arch=compute_90,code=compute_90"])
  AS_IF([test "x$nexar_have_cuda" = xyes], [
    AC_MSG_CHECKING([whether $NVCC compiles for $NVCC_GENCODE])
    echo '__global__ void k(int* p) { *p = 1; }' > conftest.cu
    AS_IF([$NVCC $NVCC_GENCODE -c conftest.cu -o conftest.o >&AS_MESSAGE_LOG_FD 2>&1],
      [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no]); AC_MSG_ERROR([nvcc rejects the -gencode flags "$NVCC_GENCODE"; fix --with-nvcc-gencode or use --without-cuda])])
    rm -f conftest.cu conftest.o
    AS_IF([test -f "$CUDA_DIR/lib64/libcudart_static.a" || test -f "$CUDA_DIR/lib/libcudart_static.a"], [],
      [AC_MSG_ERROR([libcudart_static.a not found under $CUDA_DIR; use --with-cuda=DIR or --without-cuda])])
    CUDA_LIBDIR="$CUDA_DIR/lib64"
    AS_IF([test -f "$CUDA_LIBDIR/libcudart_static.a"], [], [CUDA_LIBDIR="$CUDA_DIR/lib"])
    NVCC_VERSION=`$NVCC --version | sed -n 's/.*release \([[0-9.]]*\).*/\1/p'`
  ])
  AC_SUBST([NVCC]) AC_SUBST([CUDA_DIR]) AC_SUBST([CUDA_LIBDIR]) AC_SUBST([NVCC_GENCODE])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$nexar_have_cuda" = xyes])
  AS_IF([test "x$nexar_have_cuda" = xyes],
    [nexar_cuda_summary="yes: CUDA $NVCC_VERSION in $CUDA_DIR, plugin libnexar_pmpi_cuda.so for $NVCC_GENCODE"],
    [nexar_cuda_summary="no (host buffers only)"])
])
