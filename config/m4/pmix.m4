# DD_CHECK_PMIX: --with-pmix[=DIR|yes|no]. With PMIx, rank 0 publishes its
# store's address through the launcher's PMIx server (Open MPI, Slurm's
# --mpi=pmix, PRRTE), so that no address is set by hand. Default probes
# (pkg-config pmix, Debian's libpmix-dev) and goes without it quietly, as
# the other launchers' conventions still work; an explicit request that
# cannot be met fails. Sets PMIX_CFLAGS, PMIX_LIBS, HAVE_PMIX.
AC_DEFUN([DD_CHECK_PMIX], [
  AC_ARG_WITH([pmix],
    [AS_HELP_STRING([--with-pmix@<:@=DIR|yes|no@:>@], [PMIx, for rank 0's store address under PMIx launchers (default: probe)])],
    [], [with_pmix=check])
  dd_have_pmix=no
  AS_IF([test "x$with_pmix" != xno], [
    AS_CASE([$with_pmix],
      [yes|check], [PKG_CHECK_MODULES([PMIX], [pmix >= 3], [dd_have_pmix=yes], [dd_have_pmix=no])],
      [PMIX_CFLAGS="-I$with_pmix/include"; PMIX_LIBS="-L$with_pmix/lib -Wl,-rpath,$with_pmix/lib -lpmix"
       dd_save_CPPFLAGS=$CPPFLAGS; CPPFLAGS="$CPPFLAGS $PMIX_CFLAGS"
       AC_CHECK_HEADER([pmix.h], [dd_have_pmix=yes], [dd_have_pmix=no])
       CPPFLAGS=$dd_save_CPPFLAGS])
    AS_IF([test "x$dd_have_pmix" = xno && test "x$with_pmix" != xcheck],
      [AC_MSG_ERROR([--with-pmix=$with_pmix requested but PMIx was not found (Debian: libpmix-dev)])])
  ])
  AS_IF([test "x$dd_have_pmix" = xyes], [AC_DEFINE([HAVE_PMIX], [1], [PMIx found])])
  AM_CONDITIONAL([HAVE_PMIX], [test "x$dd_have_pmix" = xyes])
  AC_SUBST([PMIX_CFLAGS])
  AC_SUBST([PMIX_LIBS])
])
