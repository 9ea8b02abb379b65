"""What Keras 3 needs to train correctly under BytePSStrategy (private Keras API, kept in this one file).

- LossScaleOptimizer decides per process whether gradients are finite; under BytePSStrategy the decision is
  made global, or one worker would skip a step (and its push_pulls) that the others take.
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


def install():
    global _installed
    if _installed:
        return
    _installed = True
    _install_global_finite_check()
