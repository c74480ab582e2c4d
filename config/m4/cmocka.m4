# DD_CHECK_CMOCKA: the unit-test framework. Without it `make check` still
# runs the script tests and reports the unit tests as skipped.
AC_DEFUN([DD_CHECK_CMOCKA], [
  PKG_CHECK_MODULES([CMOCKA], [cmocka >= 1.1], [dd_have_cmocka=yes],
    [dd_have_cmocka=no
     AC_MSG_WARN([cmocka not found: make check will skip the unit tests (install libcmocka-dev)])])
  AM_CONDITIONAL([HAVE_CMOCKA], [test "x$dd_have_cmocka" = xyes])
])
