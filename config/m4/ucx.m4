# DD_CHECK_UCX: --with-ucx[=DIR|yes|no]. Default probes and warns; an
# explicit request that cannot be met fails. Sets UCX_CFLAGS, UCX_LIBS,
# HAVE_UCX (AM conditional and define).
AC_DEFUN([DD_CHECK_UCX], [
  AC_ARG_WITH([ucx],
    [AS_HELP_STRING([--with-ucx@<:@=DIR|yes|no@:>@], [UCX backend (default: probe)])],
    [], [with_ucx=check])
  dd_have_ucx=no
  AS_IF([test "x$with_ucx" != xno], [
    AS_CASE([$with_ucx],
      [yes|check], [PKG_CHECK_MODULES([UCX], [ucx], [dd_have_ucx=yes], [dd_have_ucx=no])],
      [UCX_CFLAGS="-I$with_ucx/include"; UCX_LIBS="-L$with_ucx/lib -lucp -luct -lucs"
       dd_save_CPPFLAGS=$CPPFLAGS; CPPFLAGS="$CPPFLAGS $UCX_CFLAGS"
       AC_CHECK_HEADER([ucp/api/ucp.h], [dd_have_ucx=yes], [dd_have_ucx=no])
       CPPFLAGS=$dd_save_CPPFLAGS])
    AS_IF([test "x$dd_have_ucx" = xno], [
      AS_IF([test "x$with_ucx" = xcheck],
        [AC_MSG_WARN([UCX not found: the UCX backend will not be built (install libucx-dev)])],
        [AC_MSG_ERROR([--with-ucx=$with_ucx requested but UCX was not found])])])
  ])
  AS_IF([test "x$dd_have_ucx" = xyes], [AC_DEFINE([HAVE_UCX], [1], [UCX found])])
  AM_CONDITIONAL([HAVE_UCX], [test "x$dd_have_ucx" = xyes])
  AC_SUBST([UCX_CFLAGS])
  AC_SUBST([UCX_LIBS])
])
