"""The registry: every private TensorFlow and Keras object bps_tf relies on, listed once with what bps_tf
was written against (checker.py checks them; the code elsewhere takes them from `compat.target()`)."""

import dataclasses

from bps_tf.compat.versions import HOROVOD_API, OPS, STRATEGY


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
    _extended("_create_variable", ("self", "next_creator", "kwargs"),
              "asynchronous training: the servers' copy of each trainable variable"),
    _extended("_update", ("self", "var", "fn", "args", "kwargs", "group"),
              "asynchronous training: each update pushes its change"),
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
    _module("values_util", STRATEGY, "tensorflow", "tensorflow.python.distribute.values_util",
            "asynchronous training tells a variable's assignment from an optimizer's update by where its "
            "function comes from"),
    Target("ResourceVariable", OPS, "tensorflow", "tensorflow.python.ops.resource_variable_ops",
           "ResourceVariable", "asynchronous training keeps a flag per variable beside the strategy's and a "
           "tape's variables (made directly, it is not mirrored and a tape may make it in a later trace of a "
           "function)", kind=type),
    _module("input_util", STRATEGY, "tensorflow", "tensorflow.python.distribute.input_util",
            "distributed datasets with an input context"),
    _module("input_lib_v1", STRATEGY, "tensorflow", "tensorflow.python.distribute.v1.input_lib",
            "TF1-style dataset iterators with an input context"),
    _module("reduce_util", STRATEGY, "tensorflow", "tensorflow.python.distribute.reduce_util", "ReduceOp"),
    Target("GraphOrParentsInXlaContext", OPS, "tensorflow", "tensorflow.python.ops.control_flow_util",
           "GraphOrParentsInXlaContext", "what is traced for XLA (bps_tf/ops/batched.py)", ("graph",)),
    _extended("_call_for_each_replica", ("self", "fn", "args", "kwargs"),
              "XLA-compiled replica functions run with the replica loop inside them"),
    Target("mirrored_run.call_for_each_replica", STRATEGY, "tensorflow", "tensorflow.python.distribute.mirrored_run",
           "call_for_each_replica", "the replica loop inside an XLA-compiled function",
           ("strategy", "fn", "args", "kwargs")),
    Target("Function", STRATEGY, "tensorflow", "tensorflow.python.eager.polymorphic_function.polymorphic_function",
           "Function", "which replica functions are compiled with XLA", assigns=("_jit_compile",)),
    Target("Function._clone", STRATEGY, "tensorflow",
           "tensorflow.python.eager.polymorphic_function.polymorphic_function", "Function._clone",
           "the replica loop compiled with the settings of the user's tf.function", ("self", "python_function")),
    # BytePSStrategy under Keras 3 (bps_tf/strategy/keras_integration.py).
    Target("LossScaleOptimizer.check_finite", STRATEGY, "keras", "keras.src.optimizers.loss_scale_optimizer",
           "LossScaleOptimizer.check_finite", "the skip-or-apply decision made the same on every worker",
           ("self", "grads")),
    Target("strategy.LossScaleOptimizer.apply", STRATEGY, "keras", "keras.src.optimizers.loss_scale_optimizer",
           "LossScaleOptimizer.apply", "gradients reduced before the finiteness check, as the backward pass makes them",
           ("self", "grads", "trainable_variables")),
    Target("strategy.TFOptimizer._all_reduce_sum_gradients", STRATEGY, "keras",
           "keras.src.backend.tensorflow.optimizer", "TFOptimizer._all_reduce_sum_gradients",
           "gradients reduced before the finiteness check are not reduced again", ("self", "grads_and_vars")),
    Target("Optimizer._overwrite_variable_with_gradient", STRATEGY, "keras", "keras.src.optimizers.base_optimizer",
           "BaseOptimizer._overwrite_variable_with_gradient", "gradients Keras writes into their variable stay local",
           ("self", "variable")),
    Target("trainer.reduce_per_replica", STRATEGY, "keras", "keras.src.backend.tensorflow.trainer",
           "reduce_per_replica", "predict() gathers every worker's outputs", ("values", "strategy", "reduction")),
    Target("trainer._multi_worker_concat", STRATEGY, "keras", "keras.src.backend.tensorflow.trainer",
           "_multi_worker_concat", "predict() gathers every worker's outputs", ("v", "strategy")),
    Target("TensorFlowTrainer._maybe_symbolic_build", STRATEGY, "keras", "keras.src.backend.tensorflow.trainer",
           "TensorFlowTrainer._maybe_symbolic_build", "the model is built from this worker's first batch, whose size "
           "may differ from other workers' (uneven batches)", ("self", "iterator", "data_batch")),
    Target("TensorFlowTrainer.make_train_function", STRATEGY, "keras", "keras.src.backend.tensorflow.trainer",
           "TensorFlowTrainer.make_train_function", "with backup workers a worker behind skips its steps' compute",
           ("self", "force")),
    Target("DistributedIterator", STRATEGY, "tensorflow", "tensorflow.python.distribute.input_lib",
           "DistributedIterator", "with stragglers a fit step does not wait for every worker to agree that data "
           "remains (fit agrees the epoch's length first); an epoch's input resources are deleted off the "
           "training thread", assigns=("_enable_get_next_as_optional", "_iterators")),
    Target("SingleWorkerOwnedDatasetIterator", STRATEGY, "tensorflow", "tensorflow.python.distribute.input_lib",
           "_SingleWorkerOwnedDatasetIterator", "an epoch's input resources are deleted off the training thread",
           assigns=("_iterator",)),
    Target("OwnedMultiDeviceIterator", STRATEGY, "tensorflow", "tensorflow.python.data.ops.multi_device_iterator_ops",
           "OwnedMultiDeviceIterator", "an epoch's input resources are deleted off the training thread",
           assigns=("_multi_device_iterator_resource", "_device_iterators")),
    Target("OwnedIterator", STRATEGY, "tensorflow", "tensorflow.python.data.ops.iterator_ops", "OwnedIterator",
           "an epoch's input resources are deleted off the training thread", assigns=("_iterator_resource",)),
    Target("tf_keras.reduce_per_replica", STRATEGY, "tf_keras", "tf_keras.src.engine.training",
           "reduce_per_replica", "predict() gathers every worker's outputs", ("values", "strategy", "reduction")),
    Target("tf_keras._multi_worker_concat", STRATEGY, "tf_keras", "tf_keras.src.engine.training",
           "_multi_worker_concat", "predict() gathers every worker's outputs", ("v", "strategy")),
    Target("Trainer.reset_metrics", STRATEGY, "keras", "keras.src.trainers.trainer", "Trainer.reset_metrics",
           "metrics are zeroed without a reduction across workers", ("self",)),
    Target("Trainer.get_metrics_result", STRATEGY, "keras", "keras.src.trainers.trainer",
           "Trainer.get_metrics_result", "metrics read at the end of an epoch are reduced in one batch", ("self",)),
    Target("tf_keras.Model.reset_metrics", STRATEGY, "tf_keras", "tf_keras.src.engine.training",
           "Model.reset_metrics", "metrics are zeroed without a reduction across workers", ("self",)),
    Target("TFEpochIterator", STRATEGY, "keras", "keras.src.backend.tensorflow.trainer", "TFEpochIterator",
           "the strategy an epoch iterates under", assigns=("_distribute_strategy",)),
    Target("TFEpochIterator._get_iterator", STRATEGY, "keras", "keras.src.backend.tensorflow.trainer",
           "TFEpochIterator._get_iterator", "an epoch's iterators are made when first used", ("self",)),
    Target("TFEpochIterator.__next__", STRATEGY, "keras", "keras.src.backend.tensorflow.trainer",
           "TFEpochIterator.__next__", "an epoch's iterators are made when first used", ("self",)),
    Target("EpochIterator.__init__", STRATEGY, "keras", "keras.src.trainers.epoch_iterator",
           "EpochIterator.__init__", "every worker takes the same number of steps per epoch",
           ("self", "x", "y", "sample_weight", "batch_size", "steps_per_epoch", "shuffle", "class_weight",
            "steps_per_execution")),
    Target("EpochIterator.reset", STRATEGY, "keras", "keras.src.trainers.epoch_iterator", "EpochIterator.reset",
           "every worker takes the same number of steps per epoch", ("self",)),
    Target("EpochIterator", STRATEGY, "keras", "keras.src.trainers.epoch_iterator", "EpochIterator",
           "every worker takes the same number of steps per epoch", assigns=("_num_batches", "steps_per_epoch")),
    Target("EpochIterator.data_adapter", STRATEGY, "keras", "keras.src.trainers.epoch_iterator", "EpochIterator",
           "only pipelines that run no Python are deleted off the training thread", assigns=("data_adapter",)),
    Target("ArrayDataAdapter", STRATEGY, "keras", "keras.src.trainers.data_adapters.array_data_adapter",
           "ArrayDataAdapter", "its pipelines are deleted off the training thread", kind=type),
    Target("TFDatasetAdapter", STRATEGY, "keras", "keras.src.trainers.data_adapters.tf_dataset_adapter",
           "TFDatasetAdapter", "its pipelines are deleted off the training thread", kind=type),
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
    Target("Trainer._resolve_auto_jit_compile", STRATEGY, "keras", "keras.src.trainers.trainer",
           "Trainer._resolve_auto_jit_compile", "jit_compile='auto' compiles with XLA where it does on one device "
           "(and not where asynchronous training pushes weights: also the Horovod API's)", ("self",)),
    Target("Trainer._symbolic_build", STRATEGY, "keras", "keras.src.trainers.trainer", "Trainer._symbolic_build",
           "the model is built from this worker's first batch, taken only when something is unbuilt",
           ("self", "iterator", "data_batch")),
    Target("model_supports_jit", STRATEGY, "keras", "keras.src.trainers.trainer", "model_supports_jit",
           "jit_compile='auto' compiles with XLA where it does on one device", ("model",)),
    # The Horovod-compatible API (bps_tf/tensorflow/optimizer.py).
    Target("Optimizer._all_reduce_sum_gradients", HOROVOD_API, "keras", "keras.src.backend.tensorflow.optimizer",
           "TFOptimizer._all_reduce_sum_gradients", "DistributedOptimizer reduces Keras 3 gradients there",
           ("self", "grads_and_vars")),
    Target("Optimizer.gradient_accumulation_steps", HOROVOD_API, "keras", "keras.src.optimizers.base_optimizer",
           "BaseOptimizer", "backward_passes_per_step on Keras 3", assigns=("gradient_accumulation_steps",)),
    Target("LossScaleOptimizer.apply", HOROVOD_API, "keras", "keras.src.optimizers.loss_scale_optimizer",
           "LossScaleOptimizer.apply", "gradients reduced before the finiteness check",
           ("self", "grads", "trainable_variables")),
    Target("Optimizer._trainable_variables", HOROVOD_API, "keras", "keras.src.optimizers.base_optimizer",
           "BaseOptimizer", "a LossScaleOptimizer's apply() without variables reduces the gradients of those it "
           "was built with", assigns=("_trainable_variables",)),
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
