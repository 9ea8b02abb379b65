"""bps_tf.compat: each private TensorFlow/Keras target is checked, and a missing or changed one is an error
that names the installed and supported versions (never a silent skip)."""

import importlib
import importlib.metadata
import sys
import types

import pytest
import tensorflow as tf  # noqa: F401  (loads Keras 3 too)

from bps_tf import compat


@pytest.fixture(autouse=True)
def fresh_checks(monkeypatch):
    """Every test starts with nothing checked and leaves the real objects in place."""
    monkeypatch.setattr(compat.checker, "_checked", set())
    monkeypatch.delenv("BYTEPS_ALLOW_UNTESTED_VERSIONS", raising=False)


def _owner_and_name(target):
    owner = importlib.import_module(compat.module_of(target))
    *path, name = target.attribute.split(".")
    for part in path:
        owner = getattr(owner, part)
    return owner, name


def _installed(target):
    return compat.installed_version(target.package) is not None


TARGETS = [pytest.param(t, id=t.key) for t in compat.TARGETS]


@pytest.mark.parametrize("target", TARGETS)
def test_every_target_holds_in_the_installed_versions(target):
    if not _installed(target):
        pytest.skip(f"{target.package} is not installed")
    assert compat.problem(target) is None


@pytest.mark.parametrize("target", TARGETS)
def test_a_missing_target_is_an_error_naming_the_versions(target, monkeypatch):
    if not _installed(target):
        pytest.skip(f"{target.package} is not installed")
    name = None
    if target.attribute:
        owner, name = _owner_and_name(target)
        # From the class and every base class that defines it too, so that nothing can be inherited.
        for cls in getattr(owner, "__mro__", [owner]):
            if cls is not object and name in vars(cls):
                monkeypatch.delattr(cls, name)
    else:
        monkeypatch.setitem(sys.modules, compat.module_of(target), None)  # the module cannot be imported
    with pytest.raises(compat.IncompatibleVersionError) as raised:
        compat.check(target.part, target.package)
    message = str(raised.value)
    assert target.key in message
    assert "is missing" in message or (name == "__init__" and "takes (" in message)  # object's __init__ is left
    assert f"{target.package} {compat.installed_version(target.package)}" in message  # installed
    supported = compat.SUPPORTED_VERSIONS[target.part][target.package]
    assert all(f"{v}.x" in message for v in supported)  # supported


def _changed_stand_in(target, original):
    """An object like `original` but changed the way the check must notice."""
    if target.kind is not None:
        return object()  # of no kind a target names
    if target.parameters is not None:
        def changed(*renamed_parameters):
            return None
        if isinstance(original, property):
            return property(changed)
        return changed
    if target.assigns:
        return _ClassThatSetsNothingBpsTfNeeds
    return None


class _ClassThatSetsNothingBpsTfNeeds:
    def __init__(self):
        self.something_else = None


@pytest.mark.parametrize("target", [t for t in TARGETS if t.values[0].kind or t.values[0].parameters is not None
                                    or t.values[0].assigns])
def test_a_changed_target_is_an_error_naming_the_versions(target, monkeypatch):
    if not _installed(target):
        pytest.skip(f"{target.package} is not installed")
    owner, name = _owner_and_name(target)
    original = owner.__dict__.get(name, getattr(owner, name))
    monkeypatch.setattr(owner, name, _changed_stand_in(target, original))
    with pytest.raises(compat.IncompatibleVersionError) as raised:
        compat.check(target.part, target.package)
    message = str(raised.value)
    assert target.key in message
    assert any(word in message for word in ("takes (", "no longer sets", "is a object"))
    assert f"installed: tensorflow {compat.installed_version('tensorflow')}" in message


def test_an_untested_version_is_an_error_unless_allowed(monkeypatch):
    monkeypatch.setitem(compat.SUPPORTED_VERSIONS, compat.OPS, {"tensorflow": ("1.99",)})
    with pytest.raises(compat.IncompatibleVersionError, match=r"was not tested.*tensorflow 1\.99\.x"):
        compat.check(compat.OPS, "tensorflow")
    monkeypatch.setenv("BYTEPS_ALLOW_UNTESTED_VERSIONS", "1")
    with pytest.warns(UserWarning, match="was not tested"):
        compat.check(compat.OPS, "tensorflow")


def test_an_allowed_untested_version_still_fails_on_a_missing_target(monkeypatch):
    monkeypatch.setitem(compat.SUPPORTED_VERSIONS, compat.OPS, {"tensorflow": ("1.99",)})
    monkeypatch.setenv("BYTEPS_ALLOW_UNTESTED_VERSIONS", "1")
    auto_control_deps = importlib.import_module("tensorflow.python.framework.auto_control_deps")
    monkeypatch.delattr(auto_control_deps, "ASYNC_STATEFUL_OPS")
    with pytest.raises(compat.IncompatibleVersionError, match="ASYNC_STATEFUL_OPS"):
        compat.check(compat.OPS, "tensorflow")


def test_a_package_that_is_not_installed_is_not_checked(monkeypatch):
    monkeypatch.setattr(compat.keras_flavour, "installed_version", lambda package: None)
    compat.check(compat.STRATEGY, "keras")  # nothing to check, no error


def test_keras_in_use_follows_tf_use_legacy_keras(monkeypatch):
    monkeypatch.delenv("TF_USE_LEGACY_KERAS", raising=False)
    assert compat.keras_in_use() == "keras"
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "1")
    assert compat.keras_in_use() == ("tf_keras" if compat.installed_version("tf_keras") else None)


def test_replace_puts_a_value_where_the_target_is_and_returns_the_original(monkeypatch):
    epoch_iterator = importlib.import_module("keras.src.trainers.epoch_iterator").EpochIterator
    original_reset = epoch_iterator.reset
    monkeypatch.setattr(epoch_iterator, "reset", original_reset)  # restored after the test

    def reset(self):
        return None

    assert compat.replace("EpochIterator.reset", reset) is original_reset
    assert epoch_iterator.reset is reset


def test_keras_2_under_the_name_keras_counts_as_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "keras", types.SimpleNamespace(__version__="2.15.0"))
    assert compat.installed_version("keras") is None


def _versions(monkeypatch, **versions):
    """Pretends these module versions are installed (None: not installed)."""
    monkeypatch.setattr(compat.keras_flavour, "_version_of", lambda module, distributions: versions.get(module))


def test_keras_2_is_tf_keras_beside_keras_3(monkeypatch):
    _versions(monkeypatch, tensorflow="2.21.0", keras="3.15.1", tf_keras="2.21.0")
    monkeypatch.delenv("TF_USE_LEGACY_KERAS", raising=False)
    assert compat.keras2_module_name() == "tf_keras"
    assert compat.keras_in_use() == "keras"
    assert compat.installed_version("tf_keras") == "2.21.0"


def test_keras_2_is_the_keras_package_on_tensorflow_2_15(monkeypatch):
    _versions(monkeypatch, tensorflow="2.15.1", keras="2.15.0")
    monkeypatch.delenv("TF_USE_LEGACY_KERAS", raising=False)
    assert compat.keras2_module_name() == "keras"
    assert compat.installed_version("keras") is None  # "keras" means Keras 3
    assert compat.installed_version("tf_keras") == "2.15.0"
    assert compat.keras_in_use() == "tf_keras"
    target = next(t for t in compat.TARGETS if t.key == "BatchNormalization._calculate_mean_and_var")
    assert compat.module_of(target) == "keras.src.layers.normalization.batch_normalization"
    assert compat.op_library_name() == "_bps_ops_tf2.15.so"
    python, release = f"cp{sys.version_info.major}{sys.version_info.minor}", importlib.metadata.version("bps_tf")
    assert compat.wheel_name() == f"bps_tf-{release.split('+')[0]}+tf2.15-{python}-{python}-linux_x86_64.whl"


def test_tf_use_legacy_keras_chooses_tf_keras_even_beside_keras_2(monkeypatch):
    _versions(monkeypatch, tensorflow="2.15.1", keras="2.15.0", tf_keras="2.15.1")
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "1")
    assert compat.keras2_module_name() == "tf_keras"
    assert compat.installed_version("tf_keras") == "2.15.1"


def test_the_op_library_is_named_after_the_tensorflow_line():
    line = compat.versions.major_minor(compat.installed_version('tensorflow'))
    assert compat.op_library_name() == f"_bps_ops_tf{line}.so"
    assert compat.versions.major_minor("2.21.0") in compat.TF_LINES and "2.15" in compat.TF_LINES
