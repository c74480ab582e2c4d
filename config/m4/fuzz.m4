# DD_CHECK_FUZZ: a clang whose -fsanitize=fuzzer links (libFuzzer), for
# `make fuzz`. --with-fuzz-cc=CC names it (default clang); an explicit
# request that does not work fails; without one a missing libFuzzer only
# leaves the fuzz targets out. Sets FUZZ_CC and HAVE_FUZZ.
AC_DEFUN([DD_CHECK_FUZZ], [
  AC_ARG_WITH([fuzz-cc],
    [AS_HELP_STRING([--with-fuzz-cc=CC], [clang with libFuzzer for make fuzz (default: clang if it works; no: none)])],
    [], [with_fuzz_cc=check])
  dd_have_fuzz=no
  FUZZ_CC=""
  AS_IF([test "x$with_fuzz_cc" != xno], [
    dd_fuzz_cc=$with_fuzz_cc
    AS_IF([test "x$dd_fuzz_cc" = xcheck || test "x$dd_fuzz_cc" = xyes], [dd_fuzz_cc=clang])
    AC_MSG_CHECKING([whether $dd_fuzz_cc links -fsanitize=fuzzer])
    cat >conftest_fuzz.c <<_DDEOF
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return (int)(size & 0); }
_DDEOF
    AS_IF([$dd_fuzz_cc -fsanitize=fuzzer,address,undefined conftest_fuzz.c -o conftest_fuzz >&AS_MESSAGE_LOG_FD 2>&1],
      [dd_have_fuzz=yes; FUZZ_CC=$dd_fuzz_cc])
    rm -f conftest_fuzz.c conftest_fuzz
    AC_MSG_RESULT([$dd_have_fuzz])
    AS_IF([test "x$dd_have_fuzz" = xno && test "x$with_fuzz_cc" != xcheck],
      [AC_MSG_ERROR([--with-fuzz-cc=$with_fuzz_cc: $dd_fuzz_cc cannot link -fsanitize=fuzzer (install clang)])])
  ])
  AC_SUBST([FUZZ_CC])
  AM_CONDITIONAL([HAVE_FUZZ], [test "x$dd_have_fuzz" = xyes])
])
