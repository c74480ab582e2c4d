# DD_CHECK_CUDA: --with-cuda[=DIR|yes|no]. Default probes /usr/local/cuda and
# nvcc on PATH and warns when missing; an explicit request that cannot be met
# fails. Only GPU modules use CUDA: the core library never links it.
# Sets CUDA_CPPFLAGS, CUDA_LDFLAGS, CUDA_LIBS, NVCC, HAVE_CUDA.
AC_DEFUN([DD_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=DIR|yes|no@:>@], [CUDA toolkit (default: probe)])],
    [], [with_cuda=check])
  dd_have_cuda=no
  dd_cuda_dir=
  AS_IF([test "x$with_cuda" != xno], [
    AS_CASE([$with_cuda],
      [yes|check], [AC_PATH_PROG([dd_nvcc_path], [nvcc], [], [$PATH:/usr/local/cuda/bin])
                    AS_IF([test -n "$dd_nvcc_path"], [dd_cuda_dir=`dirname \`dirname "$dd_nvcc_path"\``],
                          [dd_cuda_dir=/usr/local/cuda])],
      [dd_cuda_dir=$with_cuda])
    CUDA_CPPFLAGS="-I$dd_cuda_dir/include"
    CUDA_LDFLAGS="-L$dd_cuda_dir/lib64 -Wl,-rpath,$dd_cuda_dir/lib64"
    dd_save_CPPFLAGS=$CPPFLAGS; dd_save_LDFLAGS=$LDFLAGS; dd_save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"; LDFLAGS="$LDFLAGS $CUDA_LDFLAGS"
    AC_CHECK_HEADER([cuda_runtime.h],
      [AC_CHECK_LIB([cudart], [cudaGetDeviceCount], [dd_have_cuda=yes])])
    CPPFLAGS=$dd_save_CPPFLAGS; LDFLAGS=$dd_save_LDFLAGS; LIBS=$dd_save_LIBS
    AS_IF([test "x$dd_have_cuda" = xyes],
      [CUDA_LIBS="-lcudart"; NVCC="$dd_cuda_dir/bin/nvcc"],
      [AS_IF([test "x$with_cuda" = xcheck],
        [AC_MSG_WARN([CUDA not found: GPU modules will not be built])],
        [AC_MSG_ERROR([--with-cuda=$with_cuda requested but CUDA was not found in $dd_cuda_dir])])])
  ])
  AS_IF([test "x$dd_have_cuda" = xyes], [AC_DEFINE([HAVE_CUDA], [1], [CUDA found])])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$dd_have_cuda" = xyes])
  dd_have_nvcc=no
  AS_IF([test "x$dd_have_cuda" = xyes && test -x "$NVCC"], [dd_have_nvcc=yes])
  AM_CONDITIONAL([HAVE_NVCC], [test "x$dd_have_nvcc" = xyes])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_LDFLAGS])
  AC_SUBST([CUDA_LIBS])
  AC_SUBST([NVCC])
])
