# DD_CHECK_NCCL: --with-nccl[=DIR|yes|no]; needs CUDA. Default looks beside
# the CUDA toolkit and warns when missing; an explicit request that cannot be
# met fails. Sets NCCL_CPPFLAGS, NCCL_LDFLAGS, NCCL_LIBS, HAVE_NCCL.
AC_DEFUN([DD_CHECK_NCCL], [
  AC_ARG_WITH([nccl],
    [AS_HELP_STRING([--with-nccl@<:@=DIR|yes|no@:>@], [NCCL backend (default: probe)])],
    [], [with_nccl=check])
  dd_have_nccl=no
  AS_IF([test "x$with_nccl" != xno], [
    AS_CASE([$with_nccl],
      [yes|check], [NCCL_CPPFLAGS=""; NCCL_LDFLAGS=""],
      [NCCL_CPPFLAGS="-I$with_nccl/include"
       NCCL_LDFLAGS="-L$with_nccl/lib -L$with_nccl/lib64 -Wl,-rpath,$with_nccl/lib -Wl,-rpath,$with_nccl/lib64"])
    AS_IF([test "x$dd_have_cuda" = xyes], [
      dd_save_CPPFLAGS=$CPPFLAGS; dd_save_LDFLAGS=$LDFLAGS; dd_save_LIBS=$LIBS
      CPPFLAGS="$CPPFLAGS $NCCL_CPPFLAGS $CUDA_CPPFLAGS"
      LDFLAGS="$LDFLAGS $NCCL_LDFLAGS $CUDA_LDFLAGS"
      AC_CHECK_HEADER([nccl.h],
        [AC_CHECK_LIB([nccl], [ncclCommInitRank], [dd_have_nccl=yes], [], [-lcudart])])
      CPPFLAGS=$dd_save_CPPFLAGS; LDFLAGS=$dd_save_LDFLAGS; LIBS=$dd_save_LIBS
    ])
    AS_IF([test "x$dd_have_nccl" = xno], [
      AS_IF([test "x$with_nccl" = xcheck],
        [AC_MSG_WARN([NCCL not found (or no CUDA): the NCCL backend will not be built])],
        [AC_MSG_ERROR([--with-nccl=$with_nccl requested but NCCL (with CUDA) was not found])])])
  ])
  AS_IF([test "x$dd_have_nccl" = xyes], [NCCL_LIBS="-lnccl"; AC_DEFINE([HAVE_NCCL], [1], [NCCL found])])
  AM_CONDITIONAL([HAVE_NCCL], [test "x$dd_have_nccl" = xyes])
  AC_SUBST([NCCL_CPPFLAGS])
  AC_SUBST([NCCL_LDFLAGS])
  AC_SUBST([NCCL_LIBS])
])
