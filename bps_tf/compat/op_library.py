"""The op library's file name, and the name of the wheel that holds the one for the installed TensorFlow.
The Makefile, scripts/build_ops.sh and setup-time tools ask for the first through
`python -c 'from bps_tf import compat; print(compat.op_library_name())'`, without TensorFlow loaded."""

import sys
import sysconfig
from importlib import metadata

from bps_tf.compat import keras_flavour, versions


def op_library_name():
    """The file name of the op library built for the installed TensorFlow line: each line has its own, as
    an op library works only with the TensorFlow it was compiled against."""
    return f"_bps_ops_tf{versions.major_minor(keras_flavour.installed_version('tensorflow'))}.so"


def wheel_name():
    """The file name of bps_tf's wheel for the installed TensorFlow line and this Python (as
    scripts/build_wheels.py names them: bps_tf-0.1.0+tf2.21-cp312-cp312-linux_x86_64.whl); `*` for the
    release where bps_tf is not installed as a package."""
    try:
        release = metadata.version("bps_tf").split("+")[0]
    except metadata.PackageNotFoundError:
        release = "*"
    line = versions.major_minor(keras_flavour.installed_version("tensorflow"))
    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"bps_tf-{release}+tf{line}-{python}-{python}-{platform}.whl"
