"""What Keras 3 needs to train correctly under BytePSStrategy. Every private Keras object patched here comes
from bps_tf.compat, which checks it against the supported Keras versions.

- LossScaleOptimizer checks the gradients once they are reduced (bps_tf/strategy/loss_scaling.py), so that
  every worker takes the same decision and the push_pulls overlap the backward pass.
- predict() concatenates the local replicas' outputs only (Keras 3 and tf-keras); under BytePSStrategy it
  gathers every worker's, in the order MultiWorkerMirroredStrategy uses (the data is sharded the same way),
  with batches of different sizes on different workers.
- Keras 3 builds the model from a reduction of the replicas' first batches across every worker; under
  BytePSStrategy from this worker's own first batch (workers' batch sizes differ when the global batch does
  not split evenly, e.g. 32 over 3 workers: 11, 11, 10).
- Files: only worker 0 writes checkpoints (ModelCheckpoint, BackupAndRestore) and deletes backups, and every
  worker waits until it has written them, so any worker may read a checkpoint once its callback returns;
  other workers write TensorBoard logs to a temporary directory. BackupAndRestore restores on worker 0 and
  broadcasts the state, so a resumed job needs the backup on worker 0's machine only. A backup also holds
  gradient compression's state (every worker's momentum and error feedback, the servers' residuals).
- Gradients of two optimizers of one name (Keras 3.12 names every Adam "adam") are pushed under names of
  their own, so a later optimizer does not carry on an earlier one's compression state
  (bps_tf/strategy/gradient_names.py).
- XLA: jit_compile="auto" compiles with XLA where it would on one device (a GPU, a model whose layers
  support it) and this job can (one GPU per process); Keras itself turns XLA off under any tf.distribute
  strategy. True and False are the user's choice (bps_tf/strategy/xla.py says what XLA cannot do there).
- Uneven data: every worker must take the same number of steps, or one waits for push_pulls the others
  never send. An epoch has as many steps as the worker with the fewest batches (the others skip their
  surplus batches that epoch); data of unknown length needs steps_per_epoch.
- Asynchronous training (BYTEPS_ENABLE_ASYNC, BYTEPS_STALENESS): each worker's metrics are its own (no
  reduction across workers at the end of an epoch, which would make the fast workers wait).
- Backup workers: a worker behind the rounds already complete skips its steps' compute and takes their sums
  (bps_tf/strategy/stragglers.py).
- An epoch's iterators of the distributed dataset are made when a step first uses them: Keras makes one at
  the end of every epoch that the next epoch replaces unused (bps_tf/strategy/deferred_iterators.py); and
  their resources are deleted on threads of bps_tf's, not on the training thread, where deleting them stalls
  every worker (bps_tf/strategy/iterator_release.py).
"""

import tempfile

import numpy as np
import tensorflow as tf

import bps_tf.numpy as bps_numpy
from bps_tf import compat, compression_state
from bps_tf.elastic.generations import collectives_are_local
from bps_tf.objects import broadcast_object
from bps_tf.ops import broadcast_variables
from bps_tf.process import is_async
from bps_tf.strategy import deferred_iterators, gradient_names, loss_scaling, stragglers, xla
from bps_tf.strategy.extended import BytePSExtended

_installed = False


def is_bps_strategy(strategy):
    return isinstance(getattr(strategy, "extended", None), BytePSExtended)


def _multi_worker(strategy):
    return is_bps_strategy(strategy) and strategy.extended._num_workers > 1


def _install_global_predict_concat(keras_module):
    """predict's outputs gathered from every worker, in order (`keras_module`: "trainer" for Keras 3,
    "tf_keras" for tf-keras, the prefixes of their targets)."""
    local_reduce = compat.target(f"{keras_module}.reduce_per_replica")
    multi_worker_concat = compat.target(f"{keras_module}._multi_worker_concat")

    def reduce_per_replica(values, strategy, reduction):
        if reduction == "concat" and _multi_worker(strategy):
            return tf.nest.map_structure(lambda v: multi_worker_concat(v, strategy), values)
        return local_reduce(values, strategy, reduction)

    compat.replace(f"{keras_module}.reduce_per_replica", reduce_per_replica)


def _first_local_replica(value, strategy):
    if isinstance(value, tf.distribute.DistributedValues):
        return strategy.experimental_local_results(value)[0]
    return value


def _install_local_metric_resets(key):
    """Zeroing a metric assigns its variables in the cross-replica context, and TensorFlow reads each one back
    there, a reduction over every worker whose result Keras drops: fit makes them at every epoch and
    evaluate at every call. Under BytePSStrategy those reads stay within the process. It also keeps the
    workers' collectives paired in elastic jobs, where a worker that joined holds fewer metrics (tf-keras
    builds its compiled metrics at the first step)."""
    original = compat.target(key)

    def reset_metrics(self):
        strategy = getattr(self, "distribute_strategy", None)
        if not is_bps_strategy(strategy):
            return original(self)
        with strategy.extended.local_reads():
            return original(self)

    compat.replace(key, reset_metrics)


def _install_metric_reads_together():
    """Keras 3 reads the metrics at the end of every epoch and evaluate call, one variable after another,
    each read a reduction across workers; under a multi-worker BytePSStrategy they are reduced in one batch
    first (every worker holds the same metrics: Keras builds them before the first step)."""
    local_result = compat.target("Trainer.get_metrics_result")

    def get_metrics_result(self):
        strategy = getattr(self, "_distribute_strategy", None)
        replica = tf.distribute.get_replica_context()
        if (not _multi_worker(strategy) or not tf.executing_eagerly() or collectives_are_local()
                or (replica is not None and replica.strategy is strategy)):
            return local_result(self)
        if is_async():  # no rounds bind the workers together: each reports its own metrics
            with strategy.extended.local_reads():
                return local_result(self)
        variables = {id(v): v for metric in self.metrics for v in metric.variables}.values()
        variables = [getattr(v, "value", v) for v in variables]
        with strategy.extended.reads_reduced_together(variables):
            return local_result(self)

    compat.replace("Trainer.get_metrics_result", get_metrics_result)


def _install_build_from_own_batch():
    """Keras 3 builds the model from the mean of the replicas' first batches (a reduction across every
    worker); only the batch's shapes and dtypes matter, and the replicas' batch sizes differ when the global
    batch does not split evenly. Under BytePSStrategy this worker's first replica's batch is used: nothing
    crosses processes. The batch is taken only when something is still unbuilt (Keras takes one at every
    fit, evaluate and predict call, which costs an iterator of the distributed dataset each time)."""
    local_build = compat.target("TensorFlowTrainer._maybe_symbolic_build")
    compat.target("Trainer._symbolic_build")

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        strategy = getattr(self, "_distribute_strategy", None)
        if iterator is None or not is_bps_strategy(strategy):
            return local_build(self, iterator, data_batch)

        def own_first_batch():
            for _, _, batches in iterator:
                yield None, None, [tf.nest.map_structure(lambda v: _first_local_replica(v, strategy), next(batches))]
                return

        with strategy.scope():
            self._symbolic_build(iterator=own_first_batch())

    compat.replace("TensorFlowTrainer._maybe_symbolic_build", _maybe_symbolic_build)


def _agreed_number_of_batches(local):
    """The smallest worker's number of batches, or None if any worker's is unknown."""
    if collectives_are_local():  # an elastic worker before its sync trains alone
        return local
    counts = np.zeros(bps_numpy.size(), np.int64)
    counts[bps_numpy.rank()] = -1 if local is None else local
    everyone = bps_numpy.push_pull(counts, "strategy.epoch_batches", average=False)
    return None if (everyone < 0).any() else int(everyone.min())


def _install_uniform_epoch_length():
    compat.target("TFEpochIterator")  # sets the _distribute_strategy read below
    compat.target("EpochIterator")

    def make_uniform(iterator):
        if not _multi_worker(getattr(iterator, "_distribute_strategy", None)):
            return
        agreed = _agreed_number_of_batches(iterator._num_batches)
        if agreed is None and not iterator.steps_per_epoch:
            raise ValueError("BytePSStrategy: the data's length is unknown on some worker; pass steps_per_epoch "
                             "(the same on every worker) so that all workers take the same number of steps")
        iterator._num_batches = agreed

    local_init, local_reset = compat.target("EpochIterator.__init__"), compat.target("EpochIterator.reset")

    def __init__(self, *args, **kwargs):
        local_init(self, *args, **kwargs)
        make_uniform(self)

    def reset(self):
        local_reset(self)
        make_uniform(self)

    compat.replace("EpochIterator.__init__", __init__)
    compat.replace("EpochIterator.reset", reset)


def _secondary_worker(model):
    """True on workers other than 0 of a BytePSStrategy job (the ones that must not write files)."""
    strategy = getattr(model, "distribute_strategy", None) if model is not None else None
    return is_bps_strategy(strategy) and strategy.extended._id_in_cluster != 0


def _worker_zero_writes_then_all_wait(key, every_worker_runs=False, then_on_every_worker=None):
    """Worker 0 alone runs the method (it writes a file), or every worker when `every_worker_runs` (the
    method itself sends the others' copies elsewhere); every worker of a multi-worker job then runs
    `then_on_every_worker(callback)` if given, and waits until worker 0 has written, so that whoever reads
    the file next finds it whole. Keras calls these methods at the same points on every worker (logs are
    global)."""
    original = compat.target(key)

    def method(self, *args, **kwargs):
        skip = _secondary_worker(self.model) and not every_worker_runs
        result = None if skip else original(self, *args, **kwargs)
        strategy = getattr(self.model, "distribute_strategy", None)
        if then_on_every_worker is not None and is_bps_strategy(strategy):
            then_on_every_worker(self)
        if _multi_worker(strategy):
            bps_numpy.barrier()
        return result

    compat.replace(key, method)


def _skip_on_secondary_workers(key):
    original = compat.target(key)

    def method(self, *args, **kwargs):
        if _secondary_worker(self.model):
            return None
        return original(self, *args, **kwargs)

    compat.replace(key, method)


def _install_worker_zero_files():
    compat.target("Trainer._initial_epoch")
    compat.target("TensorBoard.log_dir")
    _worker_zero_writes_then_all_wait("ModelCheckpoint._save_model")
    compat.target("BackupAndRestore.backup_dir")
    _worker_zero_writes_then_all_wait("BackupAndRestore._save_model",
                                      then_on_every_worker=lambda backup: compression_state.save(backup.backup_dir))
    _skip_on_secondary_workers("BackupAndRestore.on_train_end")

    local_restore = compat.target("BackupAndRestore.on_train_begin")

    def on_train_begin(self, logs=None):
        if not is_bps_strategy(getattr(self.model, "distribute_strategy", None)):
            return local_restore(self, logs)
        if not _secondary_worker(self.model):
            local_restore(self, logs)
        optimizer = self.model.optimizer
        if optimizer is not None and not optimizer.built:
            optimizer.build(self.model.trainable_variables)
        broadcast_variables(self.model.variables, 0, name="backup/model")
        if optimizer is not None:
            broadcast_variables(optimizer.variables, 0, name="backup/optimizer")
        self.model._initial_epoch = broadcast_object(getattr(self.model, "_initial_epoch", None), 0,
                                                     name="backup/epoch")
        compression_state.load(self.backup_dir)

    compat.replace("BackupAndRestore.on_train_begin", on_train_begin)

    local_set_model = compat.target("TensorBoard.set_model")

    def set_model(self, model):
        if _secondary_worker(model):
            self.log_dir = tempfile.mkdtemp(prefix="bps_tf_tensorboard_")
        return local_set_model(self, model)

    compat.replace("TensorBoard.set_model", set_model)


def _install_xla_by_default():
    local_resolve = compat.target("Trainer._resolve_auto_jit_compile")
    model_supports_jit = compat.target("model_supports_jit")

    def _resolve_auto_jit_compile(self):
        strategy = getattr(self, "_distribute_strategy", None)
        if not is_bps_strategy(strategy):
            return local_resolve(self)
        # Asynchronous training's weights travel outside XLA on GPUs (bps_tf/strategy/server_weights.py).
        return xla.runs_on_one_gpu(strategy) and not is_async() and bool(model_supports_jit(self))

    compat.replace("Trainer._resolve_auto_jit_compile", _resolve_auto_jit_compile)


def install():
    """Patches Keras once per process: Keras 3 where installed, and tf-keras's checkpoints when tf.keras is
    tf-keras (it writes them as under MultiWorkerMirroredStrategy: worker 0 to the path, the others to
    scratch copies it deletes)."""
    global _installed
    if _installed:
        return
    _installed = True
    if compat.keras_in_use() == "tf_keras":
        _worker_zero_writes_then_all_wait("tf_keras.ModelCheckpoint._save_model", every_worker_runs=True)
        _install_global_predict_concat("tf_keras")
        _install_local_metric_resets("tf_keras.Model.reset_metrics")
    if compat.installed_version("keras") is None:
        return
    loss_scaling.install(is_bps_strategy)
    gradient_names.install(is_bps_strategy)
    _install_global_predict_concat("trainer")
    _install_build_from_own_batch()
    _install_local_metric_resets("Trainer.reset_metrics")
    _install_metric_reads_together()
    _install_uniform_epoch_length()
    deferred_iterators.install(is_bps_strategy)
    stragglers.install(is_bps_strategy)
    _install_worker_zero_files()
    _install_xla_by_default()
