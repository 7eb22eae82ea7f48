# NEXAR_CHECK_UCX: UCX (ucp) with the tag API ucp_tag_send_nbx, optional.
#   --with-ucx=DIR  use DIR/include, and DIR/lib at run time where the
#                   system's search finds no libucp.so.0
#   --with-ucx      (or nothing) pkg-config 'ucx', then the system paths;
#                   with nothing, a UCX not found builds without it
#   --without-ucx   no UCX at all: shared memory inside a node, the MPI's
#                   own point-to-point between nodes
# nexar never links libucp: transport/ucx.cc opens it with dlopen at run
# time, so one build loads on machines with and without UCX.  Only the
# headers are needed to build.  Sets the HAVE_UCX conditional,
# NEXAR_HAVE_UCX (0 or 1) and, where known, NEXAR_UCX_LIBDIR.
AC_DEFUN([NEXAR_CHECK_UCX], [
  AC_ARG_WITH([ucx],
    [AS_HELP_STRING([--with-ucx@<:@=DIR@:>@], [UCX installation prefix (default: pkg-config ucx, then system; built without UCX where none is found)])],
    [], [with_ucx=check])
  UCX_CPPFLAGS=""; nexar_ucx_libdir=""; nexar_have_ucx=no
  AS_IF([test "x$with_ucx" = xno],
    [nexar_ucx_summary="no (--without-ucx): shared memory inside a node, the MPI's point-to-point between nodes"],
    [AS_IF([test "x$with_ucx" != xcheck && test "x$with_ucx" != xyes],
      [UCX_CPPFLAGS="-I$with_ucx/include"
       for d in lib lib64; do AS_IF([test -z "$nexar_ucx_libdir" && test -e "$with_ucx/$d/libucp.so.0"], [nexar_ucx_libdir="$with_ucx/$d"]); done],
      [AS_IF([pkg-config --exists ucx 2>/dev/null],
        [UCX_CPPFLAGS=`pkg-config --cflags ucx`; nexar_ucx_libdir=`pkg-config --variable=libdir ucx`])])
    nexar_save_CPPFLAGS="$CPPFLAGS"; nexar_save_LDFLAGS="$LDFLAGS"; nexar_save_LIBS="$LIBS"
    CPPFLAGS="$CPPFLAGS $UCX_CPPFLAGS"
    AS_IF([test -n "$nexar_ucx_libdir"], [LDFLAGS="$LDFLAGS -L$nexar_ucx_libdir"])
    nexar_have_ucx=yes
    AC_CHECK_HEADER([ucp/api/ucp.h], [], [nexar_have_ucx=no])
    # The library only proves the API's version here (ucp_tag_send_nbx:
    # UCX 1.10); nexar does not link it.
    AS_IF([test $nexar_have_ucx = yes],
      [AC_CHECK_LIB([ucp], [ucp_tag_send_nbx], [:], [nexar_have_ucx=no], [-lucs])])
    CPPFLAGS="$nexar_save_CPPFLAGS"; LDFLAGS="$nexar_save_LDFLAGS"; LIBS="$nexar_save_LIBS"
    AS_IF([test $nexar_have_ucx = no && test "x$with_ucx" != xcheck],
      [AC_MSG_ERROR([--with-ucx: ucp/api/ucp.h and libucp with ucp_tag_send_nbx (UCX >= 1.10) not found; install libucx-dev (Debian), pass --with-ucx=DIR, or --without-ucx])])
    AS_IF([test $nexar_have_ucx = yes],
      [nexar_ucx_summary="yes: loaded at run time (dlopen libucp.so.0${nexar_ucx_libdir:+, else $nexar_ucx_libdir}); headers ${UCX_CPPFLAGS:-of the system}"],
      [UCX_CPPFLAGS=""
       nexar_ucx_summary="NOT FOUND: built without UCX (between nodes the MPI's point-to-point only); install libucx-dev for UCX"])])
  AS_IF([test $nexar_have_ucx = yes], [AC_DEFINE([NEXAR_HAVE_UCX], [1], [UCX headers were found: transport/ucx.cc opens libucp at run time])],
    [AC_DEFINE([NEXAR_HAVE_UCX], [0], [built without UCX])])
  AS_IF([test -n "$nexar_ucx_libdir" && test $nexar_have_ucx = yes],
    [AC_DEFINE_UNQUOTED([NEXAR_UCX_LIBDIR], ["$nexar_ucx_libdir"], [where configure found libucp.so.0])])
  AM_CONDITIONAL([HAVE_UCX], [test $nexar_have_ucx = yes])
  AC_SUBST([UCX_CPPFLAGS])
])
