# DD_CHECK_HWLOC: --with-hwloc[=DIR|yes|no]. Default probes and warns (the
# topology module then falls back to sysfs); an explicit request that cannot
# be met fails. Sets HWLOC_CFLAGS, HWLOC_LIBS, HAVE_HWLOC.
AC_DEFUN([DD_CHECK_HWLOC], [
  AC_ARG_WITH([hwloc],
    [AS_HELP_STRING([--with-hwloc@<:@=DIR|yes|no@:>@], [hwloc topology probing (default: probe)])],
    [], [with_hwloc=check])
  dd_have_hwloc=no
  AS_IF([test "x$with_hwloc" != xno], [
    AS_CASE([$with_hwloc],
      [yes|check], [PKG_CHECK_MODULES([HWLOC], [hwloc >= 2.0], [dd_have_hwloc=yes], [dd_have_hwloc=no])],
      [HWLOC_CFLAGS="-I$with_hwloc/include"; HWLOC_LIBS="-L$with_hwloc/lib -lhwloc"
       dd_save_CPPFLAGS=$CPPFLAGS; CPPFLAGS="$CPPFLAGS $HWLOC_CFLAGS"
       AC_CHECK_HEADER([hwloc.h], [dd_have_hwloc=yes], [dd_have_hwloc=no])
       CPPFLAGS=$dd_save_CPPFLAGS])
    AS_IF([test "x$dd_have_hwloc" = xno], [
      AS_IF([test "x$with_hwloc" = xcheck],
        [AC_MSG_WARN([hwloc >= 2.0 not found: topology falls back to sysfs only (install libhwloc-dev)])],
        [AC_MSG_ERROR([--with-hwloc=$with_hwloc requested but hwloc >= 2.0 was not found])])])
  ])
  AS_IF([test "x$dd_have_hwloc" = xyes], [AC_DEFINE([HAVE_HWLOC], [1], [hwloc found])])
  AM_CONDITIONAL([HAVE_HWLOC], [test "x$dd_have_hwloc" = xyes])
  AC_SUBST([HWLOC_CFLAGS])
  AC_SUBST([HWLOC_LIBS])
])
