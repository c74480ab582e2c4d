"""python -m dreamddp.report: what a bug report needs, as DeepSpeed's
ds_report prints it: the versions of the package and of the library it
loads (and whether they match), where the library is, the backend modules
found and why any did not load, the network interface the library would
choose, Python, PyTorch, CUDA and NCCL, and the DREAMDDP_* variables set.

The modules and the interface come from `ddtopo --json`, the tool that
installs beside the library (the same probe the library runs), run against
the library this package loaded. Exit status 0, or 1 when the library
cannot be loaded (the report then says what was tried)."""

import json
import os
import platform
import shutil
import subprocess
import sys

from . import _lib, _version


def _line(key, value):
    print("%-22s %s" % (key + " ", value))


def _mapped_library():
    """The file the loader mapped for libdreamddp, or None."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                if "libdreamddp.so" in line:
                    return line.split(None, 5)[-1].strip()
    except OSError:
        pass
    return None


def _ddtopo(libpath):
    """The ddtopo that goes with the loaded library: the package's own (pip
    install), the prefix's bin beside its lib (make install), the build
    tree's tools beside its .libs, then PATH."""
    places = []
    try:
        from . import _config

        if getattr(_config, "BINDIR", None):
            places.append(os.path.join(_config.BINDIR, "ddtopo"))
    except ImportError:
        pass
    if libpath:
        up = os.path.dirname(os.path.dirname(libpath))
        places.append(os.path.join(up, "bin", "ddtopo"))
        places.append(os.path.join(up, "tools", "ddtopo"))  # a build tree's .libs
    on_path = shutil.which("ddtopo")
    if on_path:
        places.append(on_path)
    for p in places:
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


def _topology(libpath):
    tool = _ddtopo(libpath)
    if tool is None:
        return None, "ddtopo not found (looked in the package, beside the library and on PATH)"
    env = dict(os.environ)
    if libpath:
        # ddtopo runs with the library this package loaded, and so looks
        # for backend modules where that library does.
        old = env.get("LD_LIBRARY_PATH")
        env["LD_LIBRARY_PATH"] = os.path.dirname(libpath) + (":" + old if old else "")
        # ddtopo carries the library inside it and looks beside itself;
        # the loaded library looks beside itself too: add its directory.
        old = env.get("DREAMDDP_BACKEND_PATH")
        env["DREAMDDP_BACKEND_PATH"] = (old + ":" if old else "") + os.path.dirname(libpath)
    env.pop(_lib.LIBRARY_VARIABLE, None)
    try:
        out = subprocess.run([tool, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        return None, "%s --json: %s" % (tool, e)
    if out.returncode != 0:
        return None, "%s --json exited %d: %s" % (tool, out.returncode, out.stderr.decode().strip())
    try:
        return json.loads(out.stdout.decode()), tool
    except ValueError as e:
        return None, "%s --json printed no JSON: %s" % (tool, e)


def _torch():
    try:
        import torch
    except ImportError as e:
        _line("PyTorch", "not importable (%s)" % e)
        return
    _line("PyTorch", "%s (%s)" % (torch.__version__, os.path.dirname(torch.__file__)))
    _line("PyTorch CUDA", torch.version.cuda or "none (a CPU build)")
    try:
        available = torch.cuda.is_available()
        count = torch.cuda.device_count() if available else 0
    except Exception as e:  # a broken driver raises here
        available, count = False, "error: %s" % e
    _line("CUDA available", "%s (%s devices)" % (available, count))
    nccl = "none in this PyTorch"
    try:
        if torch.version.cuda:
            v = torch.cuda.nccl.version()
            nccl = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
    except Exception as e:
        nccl = "unknown (%s)" % e
    _line("PyTorch NCCL", nccl)


def main():
    status = 0
    _line("dreamddp package", "%s (%s)" % (_version.VERSION, os.path.dirname(os.path.abspath(__file__))))
    libpath = None
    try:
        lib = _lib.lib()
        libversion = lib.dd_version_string().decode()
        libpath = _mapped_library() or _lib.LOADED_FROM[0]
        _line("dreamddp library", libversion)
        _line("versions match", "yes" if libversion == _version.VERSION else
              "NO: package %s, library %s" % (_version.VERSION, libversion))
        _line("library path", "%s (found by %s)" % (libpath, _lib.LOADED_FROM[1]))
    except _lib.DreamDDPError as e:
        _line("dreamddp library", "NOT LOADED: %s" % e.message)
        status = 1
    topo, why = _topology(libpath) if libpath else (None, "no library")
    if topo is None:
        _line("backend modules", "unknown: %s" % why)
        _line("network interface", "unknown: %s" % why)
    else:
        mods = topo.get("backends") or []
        if not mods:
            _line("backend modules", "none found (%s)" % (topo.get("backends_why") or "no dd_backend_*.so beside the library or in DREAMDDP_BACKEND_PATH"))
        for m in mods:
            state = "loads" if m.get("available") else "does not load: %s" % m.get("reason")
            _line("backend module", "%s: %s (%s)" % (m.get("name"), state, m.get("path")))
        chosen = topo.get("chosen") or {}
        _line("network interface", "%s (%s)" % (chosen.get("name"), chosen.get("reason")) if chosen
              else "none usable")
        _line("probed by", why)
    _line("Python", "%s (%s)" % (platform.python_version(), sys.executable))
    _torch()
    names = sorted(k for k in os.environ if k.startswith("DREAMDDP_"))
    if not names:
        _line("DREAMDDP_* set", "none")
    for k in names:
        _line("variable", "%s=%s" % (k, os.environ[k]))
    return status


if __name__ == "__main__":
    sys.exit(main())
