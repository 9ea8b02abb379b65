"""Building a wheel (`pip wheel . --no-build-isolation`, `python -m build --no-isolation`): the native parts
are built with the repository's Bazel rules against the Python and TensorFlow of the build environment and
put into the package. The wheel's version carries the TensorFlow line its op library was built for
(0.1.0+tf2.21), and bps_tf refuses to load that library under another line (bps_tf/ops/library.py).

With BPS_TF_NATIVE_DIR set to a directory holding libbps_core.so, libbps_preload.so, _core.so and one
_bps_ops_tf<line>.so (what scripts/build_wheels.py does for each Python), the wheel takes those instead, and
its TensorFlow line is the op library's: the build environment then needs neither Bazel nor TensorFlow.

Editable installs (`pip install -e .`, what scripts/setup.sh does) build nothing: `make build` does.
"""

import glob
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
TARGETS = ["//cc:libbps_core.so", "//cc/python:_core.so", "//cc/tf:_bps_ops.so",
           "//cc/preload:libbps_preload.so"]


def _prebuilt_op_library():
    """The op library in BPS_TF_NATIVE_DIR, or None when the wheel builds its native parts itself."""
    native = os.environ.get("BPS_TF_NATIVE_DIR")
    if not native:
        return None
    found = glob.glob(os.path.join(native, "_bps_ops_tf*.so"))
    if len(found) != 1:
        raise SystemExit(f"BPS_TF_NATIVE_DIR={native} must hold one _bps_ops_tf<line>.so (found {len(found)})")
    return found[0]


def _tensorflow_line():
    """major.minor of the TensorFlow the op library is for: the prebuilt one's, else the build environment's
    (None without one), as bps_tf reads versions (its module loaded from the source tree by path: a build runs
    from any working directory)."""
    prebuilt = _prebuilt_op_library()
    if prebuilt:
        return os.path.basename(prebuilt)[len("_bps_ops_tf"):-len(".so")]
    spec = importlib.util.spec_from_file_location(
        "_bps_tf_keras_flavour", os.path.join(HERE, "bps_tf", "compat", "keras_flavour.py"))
    keras_flavour = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(keras_flavour)
    version = keras_flavour.installed_version("tensorflow")
    return ".".join(version.split(".")[:2]) if version else None


def _bazel(*args):
    flags = [f"--repo_env=PYTHON_BIN_PATH={sys.executable}",
             f"--disk_cache={os.path.expanduser('~/.cache/bps_tf/bazel-disk')}"]
    command, rest = args[0], list(args[1:])
    try:
        return subprocess.run(["bazel", command, *flags, *rest], cwd=HERE, check=True,
                              capture_output=command == "info", text=True)
    except subprocess.CalledProcessError as error:
        raise SystemExit(f"bazel {command} failed (exit {error.returncode}); its output above says why. "
                         "scripts/setup.sh installs what the build needs.") from None


class BuildNative(build_py):
    """build_py, then the native libraries into the package being built."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        line = _tensorflow_line()
        if line is None:
            raise SystemExit("bps_tf's wheel holds an op library built against TensorFlow: install TensorFlow "
                             "(2.15 to 2.21) in the build environment and build with --no-build-isolation")
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        parts = [("libbps_core.so", "libbps_core.so"), ("_core.so", f"_core{suffix}"),
                 (f"_bps_ops_tf{line}.so", f"_bps_ops_tf{line}.so"), ("libbps_preload.so", "libbps_preload.so")]
        if _prebuilt_op_library():
            sources = {name: os.path.join(os.environ["BPS_TF_NATIVE_DIR"], name) for name, _ in parts}
        else:
            sources = self._build_with_bazel(line)
        package = os.path.join(self.build_lib, "bps_tf")
        # The build directory outlives a build: another line's op library from an earlier one must not ship.
        for stale in glob.glob(os.path.join(package, "*.so")):
            os.remove(stale)
        for name, packaged in parts:
            target = os.path.join(package, packaged)
            shutil.copyfile(sources[name], target)
            os.chmod(target, 0o755)

    @staticmethod
    def _build_with_bazel(line):
        if shutil.which("bazel") is None:
            raise SystemExit("building bps_tf needs Bazel and the system libraries scripts/setup.sh installs")
        _bazel("build", "--symlink_prefix=/", *TARGETS)
        bazel_bin = _bazel("info", "bazel-bin").stdout.strip()
        return {"libbps_core.so": os.path.join(bazel_bin, "cc", "libbps_core.so"),
                "libbps_preload.so": os.path.join(bazel_bin, "cc", "preload", "libbps_preload.so"),
                "_core.so": os.path.join(bazel_bin, "cc", "python", "_core.so"),
                f"_bps_ops_tf{line}.so": os.path.join(bazel_bin, "cc", "tf", "_bps_ops.so")}


class NativeDistribution(Distribution):
    def has_ext_modules(self):
        return True  # a platform wheel (cp3xx-linux_x86_64), not a pure-Python one


def _version():
    line = _tensorflow_line()
    return f"0.1.0+tf{line}" if line else "0.1.0"


setup(version=_version(), cmdclass={"build_py": BuildNative}, distclass=NativeDistribution)
