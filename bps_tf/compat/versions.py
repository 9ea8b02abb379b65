"""The version policy: the parts of bps_tf, the TensorFlow and Keras releases each supports, and the check
of the installed versions against them."""

import os
import re
import warnings

from bps_tf.compat import keras_flavour

# The parts of bps_tf, each needing its own targets.
OPS = "ops"                  # the op library and its wrappers (bps_tf.ops)
HOROVOD_API = "horovod_api"  # bps_tf.tensorflow and bps_tf.keras
STRATEGY = "strategy"        # BytePSStrategy

# The TensorFlow lines the op library builds against and the Horovod-compatible API runs on.
TF_LINES = tuple(f"2.{minor}" for minor in range(15, 22))

# major.minor releases each part supports, by package. BytePSStrategy overrides much more private API than
# the rest: it supports the releases it was tested with.
SUPPORTED_VERSIONS = {
    OPS: {"tensorflow": TF_LINES},
    HOROVOD_API: {"tensorflow": TF_LINES, "keras": ("3.12", "3.15"), "tf_keras": TF_LINES},
    STRATEGY: {"tensorflow": ("2.15", "2.21"), "keras": ("3.12", "3.15"), "tf_keras": ("2.15", "2.21")},
}


class IncompatibleVersionError(ImportError):
    """An installed TensorFlow or Keras lacks, or has changed, what bps_tf relies on."""


def major_minor(version):
    """"2.21" of "2.21.0" (a version that does not start with two numbers: itself)."""
    match = re.match(r"(\d+)\.(\d+)", version or "")
    return f"{match.group(1)}.{match.group(2)}" if match else version


def versions_text(part):
    """The installed versions and those `part` supports, as an error message names them."""
    installed_version = keras_flavour.installed_version
    installed = ", ".join(f"{p} {installed_version(p)}" for p in keras_flavour.PACKAGES
                          if installed_version(p)) or "none"
    supported = "; ".join(f"{p} {' or '.join(v + '.x' for v in versions)}"
                          for p, versions in SUPPORTED_VERSIONS[part].items())
    return f"installed: {installed}; bps_tf's {part.replace('_', ' ')} supports {supported}"


def version_problem(part, package, allowable):
    """What is wrong with the installed version of `package` for `part` (not one it supports), or None.

    allowable: nothing else is wrong, so BYTEPS_ALLOW_UNTESTED_VERSIONS=1 turns an untested version into a
    warning (issued for the caller of the caller: the code that asked for the check).
    """
    supported = SUPPORTED_VERSIONS[part].get(package)
    version = keras_flavour.installed_version(package)
    if not supported or major_minor(version) in supported:
        return None
    message = f"{package} {version} was not tested with bps_tf's {part.replace('_', ' ')}"
    if allowable and os.environ.get("BYTEPS_ALLOW_UNTESTED_VERSIONS") == "1":
        warnings.warn(f"bps_tf: {message} ({versions_text(part)})", stacklevel=3)
        return None
    return message + " (BYTEPS_ALLOW_UNTESTED_VERSIONS=1 lets it run if nothing else is wrong)"
