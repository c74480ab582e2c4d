# DD_CHECK_GLOO: --with-gloo[=DIR|yes|no]. Gloo is C++ and ships no
# pkg-config file, so this compiles and links a small program against it.
# Sets GLOO_CPPFLAGS, GLOO_LIBS, HAVE_GLOO.
AC_DEFUN([DD_CHECK_GLOO], [
  AC_ARG_WITH([gloo],
    [AS_HELP_STRING([--with-gloo@<:@=DIR|yes|no@:>@], [Gloo backend (default: probe)])],
    [], [with_gloo=check])
  dd_have_gloo=no
  AS_IF([test "x$with_gloo" != xno], [
    AS_CASE([$with_gloo],
      [yes|check], [GLOO_CPPFLAGS=""; GLOO_LIBS="-lgloo"],
      [GLOO_CPPFLAGS="-I$with_gloo/include"; GLOO_LIBS="-L$with_gloo/lib -lgloo"])
    AC_LANG_PUSH([C++])
    dd_save_CPPFLAGS=$CPPFLAGS; dd_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $GLOO_CPPFLAGS"; LIBS="$GLOO_LIBS -lpthread $LIBS"
    AC_MSG_CHECKING([for gloo])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>]],
      [[gloo::transport::tcp::attr attr; auto dev = gloo::transport::tcp::CreateDevice(attr); (void)dev;]])],
      [dd_have_gloo=yes], [dd_have_gloo=no])
    AC_MSG_RESULT([$dd_have_gloo])
    CPPFLAGS=$dd_save_CPPFLAGS; LIBS=$dd_save_LIBS
    AC_LANG_POP([C++])
    AS_IF([test "x$dd_have_gloo" = xno], [
      AS_IF([test "x$with_gloo" = xcheck],
        [AC_MSG_WARN([Gloo not found: the Gloo backend will not be built (install libgloo-dev)])],
        [AC_MSG_ERROR([--with-gloo=$with_gloo requested but Gloo was not found])])])
  ])
  AS_IF([test "x$dd_have_gloo" = xyes], [AC_DEFINE([HAVE_GLOO], [1], [Gloo found])])
  AM_CONDITIONAL([HAVE_GLOO], [test "x$dd_have_gloo" = xyes])
  AC_SUBST([GLOO_CPPFLAGS])
  AC_SUBST([GLOO_LIBS])
])
