"""Building a wheel (`pip wheel . --no-build-isolation`, `python -m build --no-isolation`): the native parts
are built with the repository's Bazel rules against the Python and TensorFlow of the build environment and
put into the package. The wheel's version carries the TensorFlow line its op library was built for
(0.1.0+tf2.21), and bps_tf refuses to load that library under another line (bps_tf/ops/library.py).

Editable installs (`pip install -e .`, what scripts/setup.sh does) build nothing: `make build` does.
"""

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
TARGETS = ["//cc:libbps_core.so", "//cc/python:_core.so", "//cc/tf:_bps_ops.so"]


def _tensorflow_line():
    """major.minor of the build environment's TensorFlow, or None without one, as bps_tf reads versions
    (its module loaded from the source tree by path: a build runs from any working directory)."""
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
        if shutil.which("bazel") is None:
            raise SystemExit("building bps_tf needs Bazel and the system libraries scripts/setup.sh installs")
        _bazel("build", "--symlink_prefix=/", *TARGETS)
        bazel_bin = _bazel("info", "bazel-bin").stdout.strip()
        package = os.path.join(self.build_lib, "bps_tf")
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        for source, name in [("cc/libbps_core.so", "libbps_core.so"), ("cc/python/_core.so", f"_core{suffix}"),
                             ("cc/tf/_bps_ops.so", f"_bps_ops_tf{line}.so")]:
            target = os.path.join(package, name)
            shutil.copyfile(os.path.join(bazel_bin, source), target)
            os.chmod(target, 0o755)


class NativeDistribution(Distribution):
    def has_ext_modules(self):
        return True  # a platform wheel (cp3xx-linux_x86_64), not a pure-Python one


def _version():
    line = _tensorflow_line()
    return f"0.1.0+tf{line}" if line else "0.1.0"


setup(version=_version(), cmdclass={"build_py": BuildNative}, distclass=NativeDistribution)
