"""The tools (ddrun, ddtopo, ddagg, ddbench) of a pip-installed dreamddp.

pip install builds the library, its backend modules and the tools with the
project's autotools build and puts them inside the package
(dreamddp/_native/{bin,lib}); the commands pip puts on PATH run these
functions, which start the package's own binary with the package's library
directory first on LD_LIBRARY_PATH (and, for ddtopo and ddbench, which
carry the library inside them, last on DREAMDDP_BACKEND_PATH), so the tools
need no fixed install path.
"""

import os
import sys


def _native(name):
    try:
        from . import _config
    except ImportError:
        _config = None
    bindir = getattr(_config, "BINDIR", None)
    if bindir is None:
        sys.exit(
            "dreamddp: %s: this dreamddp package was not installed by pip from "
            "the source tree (no BINDIR in dreamddp/_config.py); run the %s "
            "that make install put in the prefix's bin directory" % (name, name)
        )
    path = os.path.join(bindir, name)
    libdir = _config.LIBDIR
    old = os.environ.get("LD_LIBRARY_PATH")
    os.environ["LD_LIBRARY_PATH"] = libdir + (":" + old if old else "")
    if name in ("ddtopo", "ddbench"):
        # These two carry the library inside them and look for modules
        # beside themselves: point them at the package's.
        old = os.environ.get("DREAMDDP_BACKEND_PATH")
        os.environ["DREAMDDP_BACKEND_PATH"] = (old + ":" if old else "") + libdir
    try:
        os.execv(path, [name] + sys.argv[1:])
    except OSError as e:
        sys.exit("dreamddp: cannot run %s: %s" % (path, e))


def ddrun():
    _native("ddrun")


def ddtopo():
    _native("ddtopo")


def ddagg():
    _native("ddagg")


def ddbench():
    _native("ddbench")
