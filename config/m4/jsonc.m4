# DD_CHECK_JSONC: --with-json-c[=DIR|yes|no]. json-c reads the layer
# profiles of ddbench plan and train-sim and of the tests; libdreamddp never
# links it. Default probes and warns (ddbench then says it cannot read
# profiles); an explicit request that cannot be met fails. Sets JSONC_CFLAGS,
# JSONC_LIBS, HAVE_JSONC.
AC_DEFUN([DD_CHECK_JSONC], [
  AC_ARG_WITH([json-c],
    [AS_HELP_STRING([--with-json-c@<:@=DIR|yes|no@:>@], [json-c for reading layer profiles in ddbench and the tests (default: probe)])],
    [], [with_json_c=check])
  dd_have_jsonc=no
  AS_IF([test "x$with_json_c" != xno], [
    AS_CASE([$with_json_c],
      [yes|check], [PKG_CHECK_MODULES([JSONC], [json-c >= 0.15], [dd_have_jsonc=yes], [dd_have_jsonc=no])],
      [JSONC_CFLAGS="-I$with_json_c/include/json-c"; JSONC_LIBS="-L$with_json_c/lib -ljson-c"
       dd_save_CPPFLAGS=$CPPFLAGS; CPPFLAGS="$CPPFLAGS $JSONC_CFLAGS"
       AC_CHECK_HEADER([json.h], [dd_have_jsonc=yes], [dd_have_jsonc=no])
       CPPFLAGS=$dd_save_CPPFLAGS])
    AS_IF([test "x$dd_have_jsonc" = xno], [
      AS_IF([test "x$with_json_c" = xcheck],
        [AC_MSG_WARN([json-c >= 0.15 not found: ddbench plan and train-sim cannot read profiles (install libjson-c-dev)])],
        [AC_MSG_ERROR([--with-json-c=$with_json_c requested but json-c >= 0.15 was not found])])])
  ])
  AS_IF([test "x$dd_have_jsonc" = xyes], [AC_DEFINE([HAVE_JSONC], [1], [json-c found])])
  AM_CONDITIONAL([HAVE_JSONC], [test "x$dd_have_jsonc" = xyes])
  AC_SUBST([JSONC_CFLAGS])
  AC_SUBST([JSONC_LIBS])
])
