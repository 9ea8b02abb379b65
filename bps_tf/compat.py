"""The TensorFlow and Keras versions bps_tf supports, and every private API of theirs it relies on.

Private API changes between releases without notice. A renamed method that bps_tf overrides or wraps would
not fail by itself: the override would silently stop being called and workers could train apart. So each
target is listed here once, with the signature bps_tf was written against, and checked when the part of
bps_tf that needs it is imported; the code elsewhere takes these objects from `target()`. A missing or
changed target, or a version outside the supported ones, is an IncompatibleVersionError that names the
installed and the supported versions.

BYTEPS_ALLOW_UNTESTED_VERSIONS=1 turns a version outside the supported ones into a warning (every target is
still checked).
"""

import dataclasses
import importlib
import importlib.metadata
import inspect
import os
import re
import sys
import warnings

# The parts of bps_tf, each needing its own targets.
OPS = "ops"                  # the op library and its wrappers (bps_tf.ops)
HOROVOD_API = "horovod_api"  # bps_tf.tensorflow and bps_tf.keras
STRATEGY = "strategy"        # BytePSStrategy

# The packages whose private API is used. "keras" is Keras 3. "tf_keras" is Keras 2: the tf-keras package
# (TensorFlow 2.16 and later, tf.keras with TF_USE_LEGACY_KERAS=1), or the keras package itself where it is
# still Keras 2 (TensorFlow 2.15, whose tf.keras it is). Targets name its modules "tf_keras.*" either way.
PACKAGES = ("tensorflow", "keras", "tf_keras")

# The TensorFlow lines the op library builds against and the Horovod-compatible API runs on.
TF_LINES = tuple(f"2.{minor}" for minor in range(15, 22))

# major.minor releases each part supports, by package. BytePSStrategy overrides much more private API than
# the rest: it supports the releases it was tested with.
SUPPORTED_VERSIONS = {
    OPS: {"tensorflow": TF_LINES},
    HOROVOD_API: {"tensorflow": TF_LINES, "keras": ("3.15",), "tf_keras": TF_LINES},
    STRATEGY: {"tensorflow": ("2.15", "2.21"), "keras": ("3.15",), "tf_keras": ("2.15", "2.21")},
}


class IncompatibleVersionError(ImportError):
    """An installed TensorFlow or Keras lacks, or has changed, what bps_tf relies on."""


@dataclasses.dataclass(frozen=True)
class Target:
    """One private object: `module`.`attribute` of `package`, used by `part` for the reason `why`.

    parameters: the parameter names of a function or method, in order (None: not a function).
    assigns: instance attributes its class's code must assign (`self.<name> = ...`).
    kind: the type the object must have.
    """
    key: str
    part: str
    package: str
    module: str
    attribute: str
    why: str
    parameters: tuple = None
    assigns: tuple = ()
    kind: type = None


_MIRRORED = "tensorflow.python.distribute.mirrored_strategy"
_CROSS_DEVICE = "tensorflow.python.distribute.cross_device_ops"


def _extended(method, parameters, why):
    return Target(f"MirroredExtended.{method}", STRATEGY, "tensorflow", _MIRRORED, f"MirroredExtended.{method}",
                  why, parameters)


def _module(key, part, package, module, why):
    return Target(key, part, package, module, "", why)


TARGETS = (
    Target("ASYNC_STATEFUL_OPS", OPS, "tensorflow", "tensorflow.python.framework.auto_control_deps",
           "ASYNC_STATEFUL_OPS", "lets tf.function run push_pulls concurrently instead of in program order",
           kind=frozenset),
    # BytePSStrategy: the overrides of MirroredExtended (bps_tf/strategy/extended.py).
    Target("MirroredExtended", STRATEGY, "tensorflow", _MIRRORED, "MirroredExtended",
           "BytePSStrategy's extended class derives from it", parameters=None),
    _extended("_num_replicas_in_sync", None, "the global replica count"),
    _extended("_get_replica_id_in_sync_group", ("self", "replica_id"), "global replica ids"),
    _extended("_get_local_replica_id", ("self", "replica_id_in_sync_group"), "global replica ids"),
    _extended("_in_multi_worker_mode", ("self",), "multi-worker datasets and Keras behaviour"),
    _extended("_use_merge_call", ("self",), "collectives issued once per process"),
    _extended("_get_cross_device_ops", ("self", "value"), "no silent fallback to local reductions"),
    _extended("_reduce_to", ("self", "reduce_op", "value", "destinations", "options"), "reductions across processes"),
    _extended("_batch_reduce_to", ("self", "reduce_op", "value_destination_pairs", "options"),
              "batched gradient reductions"),
    _extended("_gather_to_implementation", ("self", "value", "destinations", "axis", "options"), "gathers"),
    _extended("_get_variable_creator_initial_value", ("self", "replica_id", "device", "primary_var", "kwargs"),
              "initial values broadcast from worker 0"),
    _extended("_experimental_distribute_dataset", ("self", "dataset", "options"), "per-worker dataset shards"),
    _extended("_distribute_datasets_from_function", ("self", "dataset_fn", "options"), "per-worker input contexts"),
    _extended("_experimental_distribute_values_from_function", ("self", "value_fn"), "global replica ids"),
    _extended("_make_dataset_iterator", ("self", "dataset"), "per-worker dataset shards (TF1 loops)"),
    _extended("_make_input_fn_iterator", ("self", "input_fn", "replication_mode"), "per-worker input contexts"),
    _extended("_configure", ("self", "session_config", "cluster_spec", "task_type", "task_id"),
              "Estimator's train_distribute refused with a clear error"),
    _extended("_input_workers_with_options", ("self", "options"), "per-worker dataset shards"),
    Target("CrossDeviceOps", STRATEGY, "tensorflow", _CROSS_DEVICE, "CrossDeviceOps",
           "BytePSCrossDeviceOps derives from it"),
    Target("CrossDeviceOps._gather_implementation", STRATEGY, "tensorflow", _CROSS_DEVICE,
           "CrossDeviceOps._gather_implementation",
           "gathers across processes", ("self", "per_replica_value", "destinations", "axis", "options")),
    Target("CrossDeviceOps._all_reduce", STRATEGY, "tensorflow", _CROSS_DEVICE, "CrossDeviceOps._all_reduce",
           "refused: reductions go through merge_call", ("self", "reduce_op", "value", "replica_id", "options")),
    Target("simple_broadcast", STRATEGY, "tensorflow", _CROSS_DEVICE, "simple_broadcast",
           "copies a reduced value to every local device",
           ("value", "destinations", "always_mirrored", "canonicalize_devices")),
    Target("get_devices_from", STRATEGY, "tensorflow", _CROSS_DEVICE, "get_devices_from",
           "the devices of a reduction's destination", ("destinations", "canonicalize_devices")),
    _module("distribute_values", STRATEGY, "tensorflow", "tensorflow.python.distribute.values",
            "DistributedValues and Mirrored"),
    _module("distribute_utils", STRATEGY, "tensorflow", "tensorflow.python.distribute.distribute_utils",
            "is_mirrored and regroup"),
    _module("distribute_lib", STRATEGY, "tensorflow", "tensorflow.python.distribute.distribute_lib",
            "InputContext, ValueContext, InputReplicationMode"),
    _module("input_util", STRATEGY, "tensorflow", "tensorflow.python.distribute.input_util",
            "distributed datasets with an input context"),
    _module("input_lib_v1", STRATEGY, "tensorflow", "tensorflow.python.distribute.v1.input_lib",
            "TF1-style dataset iterators with an input context"),
    _module("reduce_util", STRATEGY, "tensorflow", "tensorflow.python.distribute.reduce_util", "ReduceOp"),
    Target("GraphOrParentsInXlaContext", STRATEGY, "tensorflow", "tensorflow.python.ops.control_flow_util",
           "GraphOrParentsInXlaContext", "refusing XLA with a clear message", ("graph",)),
    # BytePSStrategy under Keras 3 (bps_tf/strategy/keras_integration.py).
    Target("LossScaleOptimizer.check_finite", STRATEGY, "keras", "keras.src.optimizers.loss_scale_optimizer",
           "LossScaleOptimizer.check_finite", "the skip-or-apply decision made the same on every worker",
           ("self", "grads")),
    Target("trainer.reduce_per_replica", STRATEGY, "keras", "keras.src.backend.tensorflow.trainer",
           "reduce_per_replica", "predict() gathers every worker's outputs", ("values", "strategy", "reduction")),
    Target("trainer._multi_worker_concat", STRATEGY, "keras", "keras.src.backend.tensorflow.trainer",
           "_multi_worker_concat", "predict() gathers every worker's outputs", ("v", "strategy")),
    Target("TFEpochIterator", STRATEGY, "keras", "keras.src.backend.tensorflow.trainer", "TFEpochIterator",
           "the strategy an epoch iterates under", assigns=("_distribute_strategy",)),
    Target("EpochIterator.__init__", STRATEGY, "keras", "keras.src.trainers.epoch_iterator",
           "EpochIterator.__init__", "every worker takes the same number of steps per epoch",
           ("self", "x", "y", "sample_weight", "batch_size", "steps_per_epoch", "shuffle", "class_weight",
            "steps_per_execution")),
    Target("EpochIterator.reset", STRATEGY, "keras", "keras.src.trainers.epoch_iterator", "EpochIterator.reset",
           "every worker takes the same number of steps per epoch", ("self",)),
    Target("EpochIterator", STRATEGY, "keras", "keras.src.trainers.epoch_iterator", "EpochIterator",
           "every worker takes the same number of steps per epoch", assigns=("_num_batches", "steps_per_epoch")),
    Target("ModelCheckpoint._save_model", STRATEGY, "keras", "keras.src.callbacks", "ModelCheckpoint._save_model",
           "only worker 0 writes checkpoints", ("self", "epoch", "batch", "logs")),
    Target("tf_keras.ModelCheckpoint._save_model", STRATEGY, "tf_keras", "tf_keras.src.callbacks",
           "ModelCheckpoint._save_model", "every worker waits until worker 0 wrote the checkpoint",
           ("self", "epoch", "batch", "logs")),
    Target("BackupAndRestore._save_model", STRATEGY, "keras", "keras.src.callbacks",
           "BackupAndRestore._save_model", "only worker 0 writes backups", ("self",)),
    Target("BackupAndRestore.on_train_begin", STRATEGY, "keras", "keras.src.callbacks",
           "BackupAndRestore.on_train_begin", "a backup restored on worker 0 reaches every worker",
           ("self", "logs")),
    Target("BackupAndRestore.backup_dir", STRATEGY, "keras", "keras.src.callbacks", "BackupAndRestore",
           "gradient compression's state is saved beside the backup", assigns=("backup_dir",)),
    Target("BackupAndRestore.on_train_end", STRATEGY, "keras", "keras.src.callbacks",
           "BackupAndRestore.on_train_end", "only worker 0 deletes backups", ("self", "logs")),
    Target("TensorBoard.set_model", STRATEGY, "keras", "keras.src.callbacks", "TensorBoard.set_model",
           "workers other than 0 log to a temporary directory", ("self", "model")),
    Target("TensorBoard.log_dir", STRATEGY, "keras", "keras.src.callbacks", "TensorBoard",
           "workers other than 0 log to a temporary directory", assigns=("log_dir",)),
    Target("Trainer._initial_epoch", STRATEGY, "keras", "keras.src.trainers.trainer", "Trainer",
           "the epoch a restored backup resumes from", assigns=("_initial_epoch",)),
    # The Horovod-compatible API (bps_tf/tensorflow/optimizer.py).
    Target("Optimizer._all_reduce_sum_gradients", HOROVOD_API, "keras", "keras.src.backend.tensorflow.optimizer",
           "TFOptimizer._all_reduce_sum_gradients", "DistributedOptimizer reduces Keras 3 gradients there",
           ("self", "grads_and_vars")),
    Target("Optimizer.gradient_accumulation_steps", HOROVOD_API, "keras", "keras.src.optimizers.base_optimizer",
           "BaseOptimizer", "backward_passes_per_step on Keras 3", assigns=("gradient_accumulation_steps",)),
    Target("LossScaleOptimizer.apply", HOROVOD_API, "keras", "keras.src.optimizers.loss_scale_optimizer",
           "LossScaleOptimizer.apply", "gradients reduced before the finiteness check",
           ("self", "grads", "trainable_variables")),
    Target("BatchNormalization._moments", HOROVOD_API, "keras", "keras.src.layers.normalization.batch_normalization",
           "BatchNormalization._moments", "SyncBatchNormalization's statistics over every worker's batch",
           ("self", "inputs", "mask")),
    Target("BatchNormalization._calculate_mean_and_var", HOROVOD_API, "tf_keras",
           "tf_keras.src.layers.normalization.batch_normalization", "BatchNormalizationBase._calculate_mean_and_var",
           "SyncBatchNormalization's statistics over every worker's batch",
           ("self", "inputs", "reduction_axes", "keep_dims", "mask")),
    Target("legacy.Optimizer._create_all_weights", HOROVOD_API, "tf_keras", "tf_keras.src.optimizers.legacy.optimizer_v2",
           "OptimizerV2._create_all_weights", "slots created before an accumulation branch", ("self", "var_list")),
    Target("v1.Optimizer._create_slots", HOROVOD_API, "tensorflow", "tensorflow.python.training.optimizer",
           "Optimizer._create_slots", "slots created before an accumulation branch", ("self", "var_list")),
)

_checked = set()  # (part, package) pairs checked in this process


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


def op_library_name():
    """The file name of the op library built for the installed TensorFlow line: each line has its own, as
    an op library works only with the TensorFlow it was compiled against."""
    return f"_bps_ops_tf{_major_minor(installed_version('tensorflow'))}.so"


def _major_minor(version):
    match = re.match(r"(\d+)\.(\d+)", version or "")
    return f"{match.group(1)}.{match.group(2)}" if match else version


def _versions_text(part):
    installed = ", ".join(f"{p} {installed_version(p)}" for p in PACKAGES if installed_version(p)) or "none"
    supported = "; ".join(f"{p} {' or '.join(v + '.x' for v in versions)}"
                          for p, versions in SUPPORTED_VERSIONS[part].items())
    return f"installed: {installed}; bps_tf's {part.replace('_', ' ')} supports {supported}"


def module_of(target):
    """The module that holds `target` here (Keras 2 targets: in the module that is Keras 2 here)."""
    if target.package == "tf_keras" and target.module.split(".")[0] == "tf_keras":
        return keras2_module_name() + target.module[len("tf_keras"):]
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
    if (part, package) in _checked or installed_version(package) is None:
        return
    problems = [f"{t.key} ({t.why}): {p}" for t in TARGETS if t.part == part and t.package == package
                for p in [problem(t)] if p]
    supported = SUPPORTED_VERSIONS[part].get(package)
    if supported and _major_minor(installed_version(package)) not in supported:
        message = f"{package} {installed_version(package)} was not tested with bps_tf's {part.replace('_', ' ')}"
        if not problems and os.environ.get("BYTEPS_ALLOW_UNTESTED_VERSIONS") == "1":
            warnings.warn(f"bps_tf: {message} ({_versions_text(part)})", stacklevel=2)
        else:
            problems.insert(0, message + " (BYTEPS_ALLOW_UNTESTED_VERSIONS=1 lets it run if nothing else is wrong)")
    if problems:
        raise IncompatibleVersionError(
            f"bps_tf cannot use this {package} safely: {'; '.join(problems)}. {_versions_text(part)}.")
    _checked.add((part, package))


def check_part(part):
    """Checks `part`'s targets in TensorFlow and in the Keras that tf.keras resolves to. (A tf-keras optimizer
    used with Keras 3 as tf.keras is checked when it is wrapped.)"""
    for package in ("tensorflow", keras_in_use()):
        if package in SUPPORTED_VERSIONS[part]:
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
