# DD_CHECK_PYTHON: --with-python[=INTERPRETER|yes|no] and
# --with-python-dir=DIR. The dreamddp Python package (python/dreamddp, the
# PyTorch front end) is pure Python over ctypes, so it needs no headers and
# never has to be rebuilt for another Python or PyTorch; this only picks
# the interpreter the tests run and the package is installed for, in this
# order: --with-python=INTERPRETER; PYTHON; the active virtual environment's
# (VIRTUAL_ENV) or conda environment's (CONDA_PREFIX) python3; the first
# python3 on PATH that imports torch; /usr/bin/python3 if it imports torch;
# the first python3 on PATH; configure says which and why. And where
# `make install` puts the package: Python's site directory under the
# prefix (PREFIX/lib/pythonX.Y/dist-packages on Debian, which puts
# /usr/local's on sys.path; site-packages elsewhere). Default probes
# and warns; an explicit request that cannot be met fails. Sets PYTHON,
# ddpythondir, HAVE_PYTHON; dd_have_python and dd_python_torch for the
# summary.
AC_DEFUN([DD_CHECK_PYTHON], [
  AC_ARG_VAR([PYTHON], [the Python interpreter of the tests and the package])
  AC_ARG_WITH([python],
    [AS_HELP_STRING([--with-python@<:@=INTERPRETER|yes|no@:>@], [install the dreamddp Python package (PyTorch front end) for this interpreter (default: PYTHON, the active venv or conda environment, the first python3 on PATH that imports torch, /usr/bin/python3 if it does, python3)])],
    [], [with_python=check])
  AC_ARG_WITH([python-dir],
    [AS_HELP_STRING([--with-python-dir=DIR], [where make install puts the Python package (default: the interpreter's site directory under the prefix)])],
    [], [with_python_dir=])
  dd_have_python=no
  dd_python_torch=no
  AS_IF([test "x$with_python" != xno], [
    dd_python_usable() { test -x "$[]1" && "$[]1" -c 'import sys; sys.exit(sys.version_info < (3, 7))' >/dev/null 2>&1; }
    dd_python_has_torch() { "$[]1" -c 'import torch' >/dev/null 2>&1; }
    dd_python_why=
    AS_CASE([$with_python],
      [yes|check], [
        AS_IF([test -n "$PYTHON"], [
          AS_IF([dd_python_usable "$PYTHON"], [dd_python_why="PYTHON is set"],
            [AC_MSG_ERROR([PYTHON=$PYTHON is not a Python 3.7 or later interpreter: set PYTHON to the path of one, or unset it to let configure choose])])
        ], [test -n "$VIRTUAL_ENV" && dd_python_usable "$VIRTUAL_ENV/bin/python3"], [
          PYTHON=$VIRTUAL_ENV/bin/python3; dd_python_why="the active virtual environment (VIRTUAL_ENV)"
        ], [test -n "$VIRTUAL_ENV" && dd_python_usable "$VIRTUAL_ENV/bin/python"], [
          PYTHON=$VIRTUAL_ENV/bin/python; dd_python_why="the active virtual environment (VIRTUAL_ENV)"
        ], [test -n "$CONDA_PREFIX" && dd_python_usable "$CONDA_PREFIX/bin/python3"], [
          PYTHON=$CONDA_PREFIX/bin/python3; dd_python_why="the active conda environment (CONDA_PREFIX)"
        ], [test -n "$CONDA_PREFIX" && dd_python_usable "$CONDA_PREFIX/bin/python"], [
          PYTHON=$CONDA_PREFIX/bin/python; dd_python_why="the active conda environment (CONDA_PREFIX)"
        ], [
          dd_python_first=
          dd_save_IFS=$IFS; IFS=$PATH_SEPARATOR
          for dd_dir in $PATH; do
            IFS=$dd_save_IFS
            test -n "$dd_dir" || dd_dir=.
            dd_python_usable "$dd_dir/python3" || continue
            AS_IF([test -z "$dd_python_first"], [dd_python_first=$dd_dir/python3])
            AS_IF([dd_python_has_torch "$dd_dir/python3"], [
              PYTHON=$dd_dir/python3; dd_python_why="the first python3 on PATH that imports torch"; break])
          done
          IFS=$dd_save_IFS
          AS_IF([test -z "$PYTHON" && dd_python_usable /usr/bin/python3 && dd_python_has_torch /usr/bin/python3], [
            PYTHON=/usr/bin/python3; dd_python_why="no python3 on PATH imports torch; /usr/bin/python3 does"])
          AS_IF([test -z "$PYTHON" && test -n "$dd_python_first"], [
            PYTHON=$dd_python_first; dd_python_why="the first python3 on PATH (none imports torch)"])
        ])
      ], [
        AS_IF([dd_python_usable "$with_python"], [PYTHON=$with_python; dd_python_why="--with-python=$with_python"],
          [AC_MSG_ERROR([--with-python=$with_python requested but it is not a Python 3.7 or later interpreter])])
      ])
    AS_IF([test -n "$PYTHON" && dd_python_has_torch "$PYTHON"], [dd_python_torch=yes])
    AC_MSG_CHECKING([for the Python of the dreamddp package])
    AS_IF([test -n "$PYTHON"], [dd_have_python=yes; AC_MSG_RESULT([$PYTHON (torch: $dd_python_torch): $dd_python_why])],
      [AC_MSG_RESULT([none])])
    AS_IF([test "x$dd_have_python" = xno], [
      AC_MSG_WARN([no Python 3 found: the dreamddp Python package is not installed])])
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
