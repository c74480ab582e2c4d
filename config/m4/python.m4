# DD_CHECK_PYTHON: --with-python[=INTERPRETER|yes|no] and
# --with-python-dir=DIR. The dreamddp Python package (python/dreamddp, the
# PyTorch front end) is pure Python over ctypes, so it needs no headers and
# never has to be rebuilt for another Python or PyTorch; this only picks
# the interpreter the tests run (PYTHON, default /usr/bin/python3 when it
# has torch, else the first python3 on PATH that has it, else the first
# found) and where `make install` puts the package: Python's site directory
# under the prefix (PREFIX/lib/pythonX.Y/dist-packages on Debian, which
# puts /usr/local's on sys.path; site-packages elsewhere). Default probes
# and warns; an explicit request that cannot be met fails. Sets PYTHON,
# ddpythondir, HAVE_PYTHON; dd_have_python and dd_python_torch for the
# summary.
AC_DEFUN([DD_CHECK_PYTHON], [
  AC_ARG_VAR([PYTHON], [the Python interpreter of the tests and the package])
  AC_ARG_WITH([python],
    [AS_HELP_STRING([--with-python@<:@=INTERPRETER|yes|no@:>@], [install the dreamddp Python package (PyTorch front end) for this interpreter (default: probe /usr/bin/python3, then python3)])],
    [], [with_python=check])
  AC_ARG_WITH([python-dir],
    [AS_HELP_STRING([--with-python-dir=DIR], [where make install puts the Python package (default: the interpreter's site directory under the prefix)])],
    [], [with_python_dir=])
  dd_have_python=no
  dd_python_torch=no
  AS_IF([test "x$with_python" != xno], [
    AS_CASE([$with_python],
      [yes|check], [AS_IF([test -n "$PYTHON"], [dd_python_candidates=$PYTHON],
                      [dd_python_candidates="/usr/bin/python3 `command -v python3 2>/dev/null`"])],
      [dd_python_candidates=$with_python])
    dd_python_first=
    for dd_py in $dd_python_candidates; do
      AS_IF([test -x "$dd_py" && "$dd_py" -c 'import sys; sys.exit(sys.version_info < (3, 7))' 2>/dev/null], [
        AS_IF([test -z "$dd_python_first"], [dd_python_first=$dd_py])
        AS_IF(["$dd_py" -c 'import torch' >/dev/null 2>&1], [
          PYTHON=$dd_py; dd_python_torch=yes; break])
      ])
    done
    AS_IF([test "x$dd_python_torch" = xno], [PYTHON=$dd_python_first])
    AC_MSG_CHECKING([for the Python of the dreamddp package])
    AS_IF([test -n "$PYTHON"], [dd_have_python=yes; AC_MSG_RESULT([$PYTHON (torch: $dd_python_torch)])],
      [AC_MSG_RESULT([none])])
    AS_IF([test "x$dd_have_python" = xno], [
      AS_IF([test "x$with_python" = xcheck],
        [AC_MSG_WARN([no Python 3 found: the dreamddp Python package is not installed])],
        [AC_MSG_ERROR([--with-python=$with_python requested but no Python 3 interpreter was found there])])])
  ])
  AS_IF([test "x$dd_have_python" = xyes && test -z "$with_python_dir"], [
    dd_py_version=`$PYTHON -c 'import sys; print("%d.%d" % sys.version_info[[:2]])'`
    AS_IF([$PYTHON -c 'import sysconfig, sys; sys.exit("dist-packages" not in sysconfig.get_path("purelib"))' 2>/dev/null],
      [with_python_dir='${prefix}'/lib/python$dd_py_version/dist-packages],
      [with_python_dir='${prefix}'/lib/python$dd_py_version/site-packages])
  ])
  ddpythondir=$with_python_dir
  AC_SUBST([ddpythondir])
  AC_SUBST([dd_have_python])
  AM_CONDITIONAL([HAVE_PYTHON], [test "x$dd_have_python" = xyes])
])
