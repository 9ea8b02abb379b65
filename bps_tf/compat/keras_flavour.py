"""Which Keras is which: the packages whose private API bps_tf uses, the installed version of each (read
without importing it), the module that is Keras 2 here, and the Keras that tf.keras resolves to."""

import importlib
import importlib.metadata
import os
import sys

# The packages whose private API is used. "keras" is Keras 3. "tf_keras" is Keras 2: the tf-keras package
# (TensorFlow 2.16 and later, tf.keras with TF_USE_LEGACY_KERAS=1), or the keras package itself where it is
# still Keras 2 (TensorFlow 2.15, whose tf.keras it is). Targets name its modules "tf_keras.*" either way.
PACKAGES = ("tensorflow", "keras", "tf_keras")

# The distributions each package comes in (its version is read without importing it).
_DISTRIBUTIONS = {
    "tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel", "tf-nightly"),
    "keras": ("keras",),
    "tf_keras": ("tf-keras", "tf_keras"),
}


def _version_of(module_name, distributions):
    """The version of a module (as imported, else as installed), or None."""
    version = getattr(sys.modules.get(module_name), "__version__", None)
    for distribution in () if version else distributions:
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return version


def _keras_package_version():
    return _version_of("keras", _DISTRIBUTIONS["keras"])


def _legacy_keras_asked():
    return os.environ.get("TF_USE_LEGACY_KERAS", "").lower() in ("1", "true", "yes")


def keras2_module_name():
    """The module that is Keras 2 here: tf_keras when installed and TF_USE_LEGACY_KERAS asks for it (as
    tf.keras then resolves), else keras where that package is Keras 2 (TensorFlow 2.15), else tf_keras if
    installed; None without a Keras 2."""
    has_tf_keras = _version_of("tf_keras", _DISTRIBUTIONS["tf_keras"]) is not None
    if has_tf_keras and _legacy_keras_asked():
        return "tf_keras"
    keras_version = _keras_package_version()
    if keras_version is not None and keras_version.startswith("2."):
        return "keras"
    return "tf_keras" if has_tf_keras else None


def keras2():
    """Keras 2's module (see keras2_module_name)."""
    return importlib.import_module(keras2_module_name())


def installed_version(package):
    """The installed version of `package` ("keras": Keras 3 only; "tf_keras": Keras 2, see PACKAGES), or None."""
    if package == "tf_keras":
        module_name = keras2_module_name()
        return None if module_name is None else _version_of(module_name, _DISTRIBUTIONS[module_name])
    version = _version_of(package, _DISTRIBUTIONS[package])
    if package == "keras" and version is not None and not version.startswith("3."):
        return None
    return version


def keras_in_use():
    """The Keras that tf.keras resolves to: "tf_keras" (Keras 2) with TF_USE_LEGACY_KERAS=1 or where the keras
    package is Keras 2 (TensorFlow 2.15), else "keras" (Keras 3); None when that one is not installed."""
    package = "tf_keras" if _legacy_keras_asked() or keras2_module_name() == "keras" else "keras"
    return package if installed_version(package) else None
