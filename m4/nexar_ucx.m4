# NEXAR_CHECK_UCX: find UCX (ucp) with the tag API ucp_tag_send_nbx.
#   --with-ucx=DIR  use DIR/include and DIR/lib; otherwise pkg-config 'ucx' or the system paths.
AC_DEFUN([NEXAR_CHECK_UCX], [
  AC_ARG_WITH([ucx],
    [AS_HELP_STRING([--with-ucx=DIR], [UCX installation prefix (default: pkg-config ucx, then system)])],
    [], [with_ucx=check])
  AS_IF([test "x$with_ucx" = xno], [AC_MSG_ERROR([UCX is required: the ring moves data with UCX tag messages])])
  UCX_CPPFLAGS=""; UCX_LDFLAGS=""; UCX_LIBS="-lucp -lucs"
  AS_IF([test "x$with_ucx" != xcheck && test "x$with_ucx" != xyes],
    [UCX_CPPFLAGS="-I$with_ucx/include"
     for d in lib lib64; do AS_IF([test -d "$with_ucx/$d"], [UCX_LDFLAGS="$UCX_LDFLAGS -L$with_ucx/$d -Wl,-rpath,$with_ucx/$d"]); done],
    [AS_IF([pkg-config --exists ucx 2>/dev/null],
      [UCX_CPPFLAGS=`pkg-config --cflags ucx`; UCX_LDFLAGS=`pkg-config --libs-only-L ucx`])])
  nexar_save_CPPFLAGS="$CPPFLAGS"; nexar_save_LDFLAGS="$LDFLAGS"; nexar_save_LIBS="$LIBS"
  CPPFLAGS="$CPPFLAGS $UCX_CPPFLAGS"; LDFLAGS="$LDFLAGS $UCX_LDFLAGS"
  AC_CHECK_HEADER([ucp/api/ucp.h], [],
    [AC_MSG_ERROR([ucp/api/ucp.h not found; install libucx-dev (Debian) or pass --with-ucx=DIR])])
  AC_CHECK_LIB([ucp], [ucp_tag_send_nbx], [],
    [AC_MSG_ERROR([libucp with ucp_tag_send_nbx (UCX >= 1.10) not found; install libucx-dev or pass --with-ucx=DIR])], [-lucs])
  CPPFLAGS="$nexar_save_CPPFLAGS"; LDFLAGS="$nexar_save_LDFLAGS"; LIBS="$nexar_save_LIBS"
  AC_SUBST([UCX_CPPFLAGS]) AC_SUBST([UCX_LDFLAGS]) AC_SUBST([UCX_LIBS])
  AS_IF([test -n "$UCX_CPPFLAGS$UCX_LDFLAGS"], [nexar_ucx_summary="$UCX_CPPFLAGS $UCX_LDFLAGS $UCX_LIBS"], [nexar_ucx_summary="system ($UCX_LIBS)"])
])
