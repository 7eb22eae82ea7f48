# NEXAR_CHECK_GTEST / NEXAR_CHECK_GBENCH: test and benchmark frameworks from the system.
AC_DEFUN([NEXAR_CHECK_GTEST], [
  AS_IF([pkg-config --exists gtest_main 2>/dev/null],
    [GTEST_CFLAGS=`pkg-config --cflags gtest_main`; GTEST_LIBS=`pkg-config --libs gtest_main`; nexar_have_gtest=yes],
    [nexar_have_gtest=no])
  AC_SUBST([GTEST_CFLAGS]) AC_SUBST([GTEST_LIBS])
  AM_CONDITIONAL([HAVE_GTEST], [test "x$nexar_have_gtest" = xyes])
  AS_IF([test "x$nexar_have_gtest" = xyes], [nexar_gtest_summary="yes (unit tests built by make check)"],
    [nexar_gtest_summary="NOT FOUND: make check will fail its unit-test step (apt-get install libgtest-dev)"])
])
AC_DEFUN([NEXAR_CHECK_GBENCH], [
  AS_IF([pkg-config --exists benchmark 2>/dev/null],
    [GBENCH_CFLAGS=`pkg-config --cflags benchmark`; GBENCH_LIBS=`pkg-config --libs benchmark`; nexar_have_gbench=yes],
    [nexar_have_gbench=no])
  AC_SUBST([GBENCH_CFLAGS]) AC_SUBST([GBENCH_LIBS])
  AM_CONDITIONAL([HAVE_GBENCH], [test "x$nexar_have_gbench" = xyes])
  AS_IF([test "x$nexar_have_gbench" = xyes], [nexar_gbench_summary="yes (make bench)"],
    [nexar_gbench_summary="no (apt-get install libbenchmark-dev for make bench)"])
])
