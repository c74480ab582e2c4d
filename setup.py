"""pip install . : builds libdreamddp, its backend modules and the tools with
the project's own autotools build (autogen.sh when there is no configure;
configure in a build directory; make; make install into a staging
directory) and installs them inside the Python package, dreamddp/_native/
{bin,lib}, with dreamddp/_config.py naming that library directory;
the backend modules go beside the library, which looks for them there. The commands ddrun,
ddtopo, ddagg and ddbench go on the environment's PATH as entry points that
run the package's binaries (dreamddp/_tools.py).

Build options, from the environment (doc/building.md):
  DREAMDDP_WITHOUT_<X>=1       configure --without-<x>
  DREAMDDP_WITH_<X>=1|DIR      configure --with-<x> (must be found), or
                               --with-<x>=DIR; =0 means --without-<x>
  for X in UCX, GLOO, NCCL, CUDA, HWLOC, JSON_C, PMIX;
  DREAMDDP_CONFIGURE_FLAGS     further configure arguments (split as a shell
                               would: shlex)
  MAKEFLAGS                    passed to make (default: -j<number of CPUs>)
"""

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
OPTIONS = ["UCX", "GLOO", "NCCL", "CUDA", "HWLOC", "JSON_C", "PMIX"]
TRUE, FALSE = ("1", "yes", "true", "on"), ("0", "no", "false", "off")
TOOLS = ["ddrun", "ddtopo", "ddagg", "ddbench"]


def version():
    ns = {}
    with open(os.path.join(ROOT, "python", "dreamddp", "_version.py")) as f:
        exec(f.read(), ns)
    return ns["VERSION"]


def configure_options(env=os.environ):
    """configure's --with-/--without- arguments from DREAMDDP_WITH_<X> and
    DREAMDDP_WITHOUT_<X>; a bad name or value raises SystemExit naming the
    variable and what it accepts."""
    args = []
    for name in sorted(env):
        for kind in ("DREAMDDP_WITHOUT_", "DREAMDDP_WITH_"):
            if not name.startswith(kind):
                continue
            opt = name[len(kind):]
            if opt not in OPTIONS:
                raise SystemExit(
                    "%s: unknown build option %s; accepted: %s"
                    % (name, opt, ", ".join(kind + o for o in OPTIONS))
                )
            flag = opt.lower().replace("_", "-")
            value = env[name].strip()
            low = value.lower()
            if kind == "DREAMDDP_WITHOUT_":
                if low in TRUE:
                    args.append("--without-" + flag)
                elif low not in FALSE + ("",):
                    raise SystemExit(
                        "%s=%s: accepted values are 1, yes, true, on (build "
                        "without %s) or 0, no, false, off, empty (the default)"
                        % (name, value, flag)
                    )
            elif low in TRUE:
                args.append("--with-" + flag)
            elif low in FALSE:
                args.append("--without-" + flag)
            elif os.path.isabs(value) and os.path.isdir(value):
                args.append("--with-%s=%s" % (flag, value))
            else:
                raise SystemExit(
                    "%s=%s: accepted values are 1, yes, true, on (require %s), "
                    "0, no, false, off (build without it) or the absolute path of "
                    "an existing directory where it is installed"
                    % (name, value, flag)
                )
            break
    for opt in OPTIONS:
        a, b = "DREAMDDP_WITH_" + opt, "DREAMDDP_WITHOUT_" + opt
        if env.get(a, "").strip() and env.get(b, "").strip().lower() in TRUE:
            raise SystemExit("%s and %s are both set; accepted: one of the two" % (a, b))
    return args


def run(cmd, cwd):
    print("dreamddp build: %s (in %s)" % (" ".join(cmd), cwd), flush=True)
    subprocess.check_call(cmd, cwd=cwd)


class BuildNative(build_py):
    """build_py, then the C library and tools into build_lib/dreamddp/_native."""

    def run(self):
        super().run()
        configure_args = CONFIGURE_ARGS
        pkg = os.path.join(self.build_lib, "dreamddp")
        native = os.path.join(pkg, "_native")
        build = os.path.abspath(os.path.join(self.build_lib, "..", "dreamddp-native"))
        stage = build + "-stage"
        # The directory where pip will most likely put the package: the
        # library's compiled-in module directory and the tools' run path
        # point there (the library also looks beside itself, and the entry
        # points set LD_LIBRARY_PATH, so another place works as well).
        prefix = os.path.join(sysconfig.get_paths()["purelib"], "dreamddp", "_native")
        if not os.path.exists(os.path.join(ROOT, "configure")):
            run(["sh", "autogen.sh"], ROOT)
        src = ROOT
        os.makedirs(build, exist_ok=True)
        shutil.rmtree(stage, ignore_errors=True)
        if os.path.exists(os.path.join(ROOT, "config.status")):
            # A tree configured in place cannot be built elsewhere too:
            # build from the copy of its sources that make distdir writes.
            src = build + "-src"
            shutil.rmtree(src, ignore_errors=True)
            run(["make", "distdir", "distdir=" + src], ROOT)
        run(
            [os.path.join(src, "configure"), "--prefix=" + prefix, "--with-python=no",
             "--disable-static"] + configure_args,
            build,
        )
        jobs = [] if os.environ.get("MAKEFLAGS") else ["-j%d" % (os.cpu_count() or 1)]
        run(["make"] + jobs, build)
        run(["make", "install", "DESTDIR=" + stage], build)
        shutil.rmtree(native, ignore_errors=True)
        staged = stage + prefix
        for sub in ("bin", "lib"):
            shutil.copytree(
                os.path.join(staged, sub), os.path.join(native, sub), symlinks=True,
                ignore=shutil.ignore_patterns("*.la", "*.a", "pkgconfig"),
            )
        # A wheel holds no symbolic links: keep the library once, under its
        # SONAME (libdreamddp.so.1, what the modules and tools load), and
        # drop the link for linking (libdreamddp.so), which C builds use.
        lib = os.path.join(native, "lib")
        for name in sorted(os.listdir(lib)):
            path = os.path.join(lib, name)
            if not os.path.islink(path):
                continue
            target = os.path.join(lib, os.readlink(path))
            os.unlink(path)
            if name.endswith(".so"):
                continue
            if os.path.exists(target):
                shutil.move(target, path)
        # The backend and device modules go beside the library, where it
        # looks for them wherever pip puts the package (make install's
        # lib/dreamddp is found only at the prefix compiled in).
        modules = os.path.join(native, "lib", "dreamddp")
        if os.path.isdir(modules):
            for name in os.listdir(modules):
                shutil.move(os.path.join(modules, name), os.path.join(native, "lib", name))
            os.rmdir(modules)
        with open(os.path.join(pkg, "_config.py"), "w") as f:
            f.write(
                '"""Written by pip install (setup.py): the library, its backend\n'
                'modules and the tools are inside the package."""\n'
                "import os\n\n"
                "_NATIVE = os.path.join(os.path.dirname(os.path.abspath(__file__)), \"_native\")\n"
                "LIBDIR = os.path.join(_NATIVE, \"lib\")\n"
                "BINDIR = os.path.join(_NATIVE, \"bin\")\n"
            )


class NativeDistribution(Distribution):
    def has_ext_modules(self):
        return True  # a platform wheel: it holds compiled code


# Read before anything is built, so that a bad option stops pip at once.
CONFIGURE_ARGS = configure_options() + shlex.split(os.environ.get("DREAMDDP_CONFIGURE_FLAGS", ""))

setup(
    name="dreamddp",
    version=version(),
    description="Keeps data-parallel model replicas in sync (layer-wise partial sync); PyTorch front end",
    license="see the source distribution",
    python_requires=">=3.7",
    packages=["dreamddp"],
    package_dir={"": "python"},
    cmdclass={"build_py": BuildNative},
    distclass=NativeDistribution,
    entry_points={"console_scripts": ["%s = dreamddp._tools:%s" % (t, t) for t in TOOLS]},
    zip_safe=False,
)
