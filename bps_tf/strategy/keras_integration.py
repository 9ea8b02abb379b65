"""What Keras 3 needs to train correctly under BytePSStrategy (private Keras API, kept in this one file).

- LossScaleOptimizer decides per process whether gradients are finite; under BytePSStrategy the decision is
  made global, or one worker would skip a step (and its push_pulls) that the others take.
- predict() concatenates the local replicas' outputs only; under BytePSStrategy it gathers every worker's,
  in the order MultiWorkerMirroredStrategy uses (the data is sharded the same way).
- Files: only worker 0 writes checkpoints (ModelCheckpoint, BackupAndRestore) and deletes backups; other
  workers write TensorBoard logs to a temporary directory. BackupAndRestore restores on worker 0 and
  broadcasts the state, so a resumed job needs the backup on worker 0's machine only.
- Uneven data: every worker must take the same number of steps, or one waits for push_pulls the others
  never send. An epoch has as many steps as the worker with the fewest batches (the others skip their
  surplus batches that epoch); data of unknown length needs steps_per_epoch.
"""

import tempfile

import numpy as np
import tensorflow as tf

_installed = False


def _is_bps_strategy_active():
    from bps_tf.strategy.strategy import BytePSStrategy

    return tf.distribute.has_strategy() and isinstance(tf.distribute.get_strategy(), BytePSStrategy)


def _install_global_finite_check():
    try:
        from keras.src.optimizers.loss_scale_optimizer import LossScaleOptimizer
    except ImportError:
        return
    local_check = LossScaleOptimizer.check_finite

    def check_finite(self, grads):
        finite = local_check(self, grads)
        context = tf.distribute.get_replica_context()
        if not _is_bps_strategy_active() or context is None:
            return finite
        non_finite = context.all_reduce(tf.distribute.ReduceOp.SUM, tf.cast(tf.logical_not(finite), tf.float32))
        return tf.equal(non_finite, 0.0)

    LossScaleOptimizer.check_finite = check_finite


def _install_global_predict_concat():
    try:
        from keras.src.backend.tensorflow import trainer
    except ImportError:
        return
    local_reduce = trainer.reduce_per_replica

    def reduce_per_replica(values, strategy, reduction):
        from bps_tf.strategy.strategy import BytePSStrategy

        if reduction == "concat" and isinstance(strategy, BytePSStrategy) and strategy.extended._num_workers > 1:
            return tf.nest.map_structure(lambda v: trainer._multi_worker_concat(v, strategy), values)
        return local_reduce(values, strategy, reduction)

    trainer.reduce_per_replica = reduce_per_replica


def _agreed_number_of_batches(local):
    """The smallest worker's number of batches, or None if any worker's is unknown."""
    import bps_tf.core as core

    counts = np.zeros(core.size(), np.int64)
    counts[core.rank()] = -1 if local is None else local
    everyone = core.push_pull(counts, "strategy.epoch_batches")
    return None if (everyone < 0).any() else int(everyone.min())


def _install_uniform_epoch_length():
    try:
        from keras.src.trainers.epoch_iterator import EpochIterator
    except ImportError:
        return
    from bps_tf.strategy.strategy import BytePSStrategy

    def make_uniform(iterator):
        strategy = getattr(iterator, "_distribute_strategy", None)
        if not isinstance(strategy, BytePSStrategy) or strategy.extended._num_workers == 1:
            return
        agreed = _agreed_number_of_batches(iterator._num_batches)
        if agreed is None and not iterator.steps_per_epoch:
            raise ValueError("BytePSStrategy: the data's length is unknown on some worker; pass steps_per_epoch "
                             "(the same on every worker) so that all workers take the same number of steps")
        iterator._num_batches = agreed

    local_init, local_reset = EpochIterator.__init__, EpochIterator.reset

    def __init__(self, *args, **kwargs):
        local_init(self, *args, **kwargs)
        make_uniform(self)

    def reset(self):
        local_reset(self)
        make_uniform(self)

    EpochIterator.__init__ = __init__
    EpochIterator.reset = reset


def _secondary_worker(model):
    """True on workers other than 0 of a BytePSStrategy job (the ones that must not write files)."""
    from bps_tf.strategy.strategy import BytePSStrategy

    strategy = getattr(model, "distribute_strategy", None) if model is not None else None
    return isinstance(strategy, BytePSStrategy) and strategy.extended._id_in_cluster != 0


def _is_bps_model(model):
    from bps_tf.strategy.strategy import BytePSStrategy

    return isinstance(getattr(model, "distribute_strategy", None), BytePSStrategy)


def _skip_on_secondary_workers(cls, method_name):
    original = getattr(cls, method_name)

    def method(self, *args, **kwargs):
        if _secondary_worker(self.model):
            return None
        return original(self, *args, **kwargs)

    setattr(cls, method_name, method)


def _install_worker_zero_files():
    from keras.src.callbacks import BackupAndRestore, ModelCheckpoint, TensorBoard

    from bps_tf.tensorflow.functions import broadcast_object, broadcast_variables

    _skip_on_secondary_workers(ModelCheckpoint, "_save_model")
    _skip_on_secondary_workers(BackupAndRestore, "_save_model")
    _skip_on_secondary_workers(BackupAndRestore, "on_train_end")

    local_restore = BackupAndRestore.on_train_begin

    def on_train_begin(self, logs=None):
        if not _is_bps_model(self.model):
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

    BackupAndRestore.on_train_begin = on_train_begin

    local_set_model = TensorBoard.set_model

    def set_model(self, model):
        if _secondary_worker(model):
            self.log_dir = tempfile.mkdtemp(prefix="bps_tf_tensorboard_")
        return local_set_model(self, model)

    TensorBoard.set_model = set_model


def install():
    global _installed
    if _installed:
        return
    _installed = True
    _install_global_finite_check()
    _install_global_predict_concat()
    _install_uniform_epoch_length()
    _install_worker_zero_files()
