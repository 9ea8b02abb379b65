"""What Keras 3 needs to train correctly under BytePSStrategy (private Keras API, kept in this one file).

- LossScaleOptimizer decides per process whether gradients are finite; under BytePSStrategy the decision is
  made global, or one worker would skip a step (and its push_pulls) that the others take.
- predict() concatenates the local replicas' outputs only; under BytePSStrategy it gathers every worker's,
  in the order MultiWorkerMirroredStrategy uses (the data is sharded the same way).
"""

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


def install():
    global _installed
    if _installed:
        return
    _installed = True
    _install_global_finite_check()
    _install_global_predict_concat()
