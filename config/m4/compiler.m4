# DD_COMPILER_FLAGS: warnings, hidden visibility, --enable-debug and
# --enable-sanitizers (ASan + UBSan). Sets DD_CFLAGS, DD_CXXFLAGS, DD_LDFLAGS.
AC_DEFUN([DD_COMPILER_FLAGS], [
  AC_ARG_ENABLE([debug],
    [AS_HELP_STRING([--enable-debug], [build with -O0 -g3 and extra checks])],
    [], [enable_debug=no])
  AC_ARG_ENABLE([sanitizers],
    [AS_HELP_STRING([--enable-sanitizers], [build with AddressSanitizer and UndefinedBehaviorSanitizer])],
    [], [enable_sanitizers=no])
  dd_warn="-Wall -Wextra -Wshadow -Wno-unused-parameter -Wpointer-arith -Wvla"
  DD_CFLAGS="$dd_warn -Wstrict-prototypes -Wmissing-prototypes -fvisibility=hidden"
  DD_CXXFLAGS="$dd_warn -fvisibility=hidden"
  DD_LDFLAGS=""
  dnl Modules are linked with --no-undefined, except in sanitizer builds:
  dnl libtool drops -fsanitize when it links a shared object, and the
  dnl sanitizer runtime comes from the executable at run time.
  DD_MODULE_NOUNDEF="-Wl,--no-undefined"
  AS_IF([test "x$enable_debug" = xyes], [
    DD_CFLAGS="$DD_CFLAGS -O0 -g3"; DD_CXXFLAGS="$DD_CXXFLAGS -O0 -g3"
    AC_DEFINE([DD_DEBUG], [1], [debug build])])
  AS_IF([test "x$enable_sanitizers" = xyes], [
    dd_san="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
    DD_CFLAGS="$DD_CFLAGS $dd_san"; DD_CXXFLAGS="$DD_CXXFLAGS $dd_san"
    DD_LDFLAGS="$DD_LDFLAGS $dd_san"
    DD_MODULE_NOUNDEF=""])
  AC_SUBST([DD_CFLAGS])
  AC_SUBST([DD_CXXFLAGS])
  AC_SUBST([DD_LDFLAGS])
  AC_SUBST([DD_MODULE_NOUNDEF])
])
