# AX_CXX_STD17: require a C++17 compiler and add -std=c++17 when needed.
AC_DEFUN([AX_CXX_STD17], [
  AC_MSG_CHECKING([whether $CXX accepts -std=c++17])
  nexar_save_CXXFLAGS="$CXXFLAGS"
  CXXFLAGS="$CXXFLAGS -std=c++17"
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#include <optional>]], [[std::optional<int> x; (void)x;]])],
    [AC_MSG_RESULT([yes])],
    [AC_MSG_RESULT([no]); AC_MSG_ERROR([a C++17 compiler is required (g++ 8 or newer)])])
  CXXFLAGS="$nexar_save_CXXFLAGS"  # Makefile.am adds -std=c++17 itself
])
