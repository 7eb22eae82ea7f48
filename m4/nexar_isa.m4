# NEXAR_CHECK_X86_ISAS: can the compiler build the AVX2 and AVX-512 copies
# of the host reducers (src/reduce/host_reduce_avx*.cc)?  Only on x86-64;
# elsewhere the baseline build is all there is.  --disable-simd skips them.
AC_DEFUN([NEXAR_CHECK_X86_ISAS], [
  AC_ARG_ENABLE([simd],
    [AS_HELP_STRING([--disable-simd], [do not build the AVX2/AVX-512 host reducers (chosen at run time by CPU)])],
    [], [enable_simd=yes])
  NEXAR_AVX2_FLAGS="-mavx2 -mfma -mf16c"
  NEXAR_AVX512_FLAGS="-mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma -mf16c -mprefer-vector-width=512"
  nexar_isa_summary="baseline only"
  nexar_have_x86_isas=no
  AS_IF([test "x$enable_simd" != xno], [
    AC_MSG_CHECKING([whether $CXX builds AVX2 and AVX-512 code])
    nexar_save_CXXFLAGS="$CXXFLAGS"
    CXXFLAGS="$CXXFLAGS $NEXAR_AVX512_FLAGS"
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <immintrin.h>]],
        [[__m512 a = _mm512_set1_ps(1.f); __m256 h = _mm256_cvtph_ps(_mm_setzero_si128());
          (void)a; (void)h; return __builtin_cpu_supports("avx512f");]])],
      [nexar_have_x86_isas=yes], [nexar_have_x86_isas=no])
    CXXFLAGS="$nexar_save_CXXFLAGS"
    AC_MSG_RESULT([$nexar_have_x86_isas])
    AS_IF([test "x$nexar_have_x86_isas" = xyes],
      [nexar_isa_summary="baseline, AVX2, AVX-512 (chosen at run time)"])
  ], [nexar_isa_summary="baseline only (--disable-simd)"])
  AC_SUBST([NEXAR_AVX2_FLAGS])
  AC_SUBST([NEXAR_AVX512_FLAGS])
  AM_CONDITIONAL([X86_ISAS], [test "x$nexar_have_x86_isas" = xyes])
])
