"""The TensorFlow and Keras versions bps_tf supports, and every private API of theirs it relies on.

Private API changes between releases without notice. A renamed method that bps_tf overrides or wraps would
not fail by itself: the override would silently stop being called and workers could train apart. So each
target is listed once (targets.py), with the signature bps_tf was written against, and checked when the
part of bps_tf that needs it is imported (checker.py); the code elsewhere takes these objects from
`target()`. A missing or changed target, or a version outside the supported ones (versions.py), is an
IncompatibleVersionError that names the installed and the supported versions.

BYTEPS_ALLOW_UNTESTED_VERSIONS=1 turns a version outside the supported ones into a warning (every target is
still checked).

Modules, each importing only those before it: keras_flavour (the packages, their installed versions, which
Keras is Keras 2 and which one tf.keras resolves to), versions (the version policy), op_library (the op
library's file name and its wheel's), targets (the registry), checker (checking, `target` and `replace`).
Callers use the names below; tests patch a name in the module that owns it.
"""

from bps_tf.compat.keras_flavour import PACKAGES, installed_version, keras2, keras2_module_name, keras_in_use
from bps_tf.compat.versions import (HOROVOD_API, OPS, STRATEGY, SUPPORTED_VERSIONS, TF_LINES,
                                    IncompatibleVersionError)
from bps_tf.compat.op_library import op_library_name, wheel_name
from bps_tf.compat.targets import TARGETS, Target
from bps_tf.compat.checker import check, check_part, module_of, problem, replace, target

__all__ = [
    "PACKAGES", "installed_version", "keras2", "keras2_module_name", "keras_in_use",
    "OPS", "HOROVOD_API", "STRATEGY", "TF_LINES", "SUPPORTED_VERSIONS", "IncompatibleVersionError",
    "op_library_name", "wheel_name", "Target", "TARGETS", "check", "check_part", "module_of", "problem", "replace",
    "target",
]
