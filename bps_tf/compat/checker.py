"""Checking the registry's targets in the installed packages, and handing them out: `check` and
`check_part` when a part of bps_tf is imported, `target` for the object itself, `replace` to patch it."""

import importlib
import inspect

from bps_tf.compat import keras_flavour, versions
from bps_tf.compat.targets import TARGETS

_checked = set()  # (part, package) pairs checked in this process


def module_of(target):
    """The module that holds `target` here (Keras 2 targets: in the module that is Keras 2 here)."""
    if target.package == "tf_keras" and target.module.split(".")[0] == "tf_keras":
        return keras_flavour.keras2_module_name() + target.module[len("tf_keras"):]
    return target.module


def _resolve(target):
    obj = importlib.import_module(module_of(target))
    for name in filter(None, target.attribute.split(".")):
        obj = getattr(obj, name)  # AttributeError: missing
    return obj


def _parameter_names(obj):
    function = obj.fget if isinstance(obj, property) else obj
    return tuple(inspect.signature(function).parameters)


def problem(target):
    """What is wrong with `target` in the installed version, or None."""
    where = f"{module_of(target)}.{target.attribute}".rstrip(".")
    try:
        obj = _resolve(target)
    except (ImportError, AttributeError) as error:
        return f"{where} is missing ({error})"
    if target.kind is not None and not isinstance(obj, target.kind):
        return f"{where} is a {type(obj).__name__}, not a {target.kind.__name__}"
    if target.parameters is not None:
        try:
            found = _parameter_names(obj)
        except (TypeError, ValueError):
            return f"{where} is not a function"
        if found != target.parameters:
            return (f"{where} takes ({', '.join(found)}), "
                    f"bps_tf was written for ({', '.join(target.parameters)})")
    if target.assigns:
        try:
            source = inspect.getsource(obj)
        except (OSError, TypeError):
            return f"the code of {where} cannot be read to check it"
        missing = [name for name in target.assigns if f"self.{name} =" not in source]
        if missing:
            return f"{where} no longer sets {', '.join(missing)}"
    return None


def check(part, package):
    """Checks the targets `part` has in `package` (once per process), if that package is installed.

    Raises IncompatibleVersionError listing every problem found.
    """
    if (part, package) in _checked or keras_flavour.installed_version(package) is None:
        return
    problems = [f"{t.key} ({t.why}): {p}" for t in TARGETS if t.part == part and t.package == package
                for p in [problem(t)] if p]
    untested = versions.version_problem(part, package, allowable=not problems)
    if untested:
        problems.insert(0, untested)
    if problems:
        raise versions.IncompatibleVersionError(
            f"bps_tf cannot use this {package} safely: {'; '.join(problems)}. {versions.versions_text(part)}.")
    _checked.add((part, package))


def check_part(part):
    """Checks `part`'s targets in TensorFlow and in the Keras that tf.keras resolves to. (A tf-keras optimizer
    used with Keras 3 as tf.keras is checked when it is wrapped.)"""
    for package in ("tensorflow", keras_flavour.keras_in_use()):
        if package in versions.SUPPORTED_VERSIONS[part]:
            check(part, package)


def target(key):
    """The private object listed under `key`, checked first (with the rest of its part and package)."""
    for t in TARGETS:
        if t.key == key:
            check(t.part, t.package)
            return _resolve(t)
    raise KeyError(f"no compatibility target '{key}'")


def replace(key, value):
    """Puts `value` where the private object listed under `key` is (a module's or a class's attribute);
    returns the original."""
    original = target(key)
    t = next(t for t in TARGETS if t.key == key)
    *owner_path, name = t.attribute.split(".")
    owner = importlib.import_module(module_of(t))
    for part in owner_path:
        owner = getattr(owner, part)
    setattr(owner, name, value)
    return original
