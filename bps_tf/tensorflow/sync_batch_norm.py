"""SyncBatchNormalization: batch normalization whose batch statistics are those of every worker's batch
together (one push_pull of the counts, sums and sums of squares per call), for small per-worker batches.

It derives from the BatchNormalization of the Keras that tf.keras resolves to (Keras 3, or Keras 2: tf-keras
with TF_USE_LEGACY_KERAS=1, or keras 2.15 on TensorFlow 2.15) and replaces the private method that computes the batch moments (bps_tf.compat).
"""

import functools

import tensorflow as tf

from bps_tf import compat
from bps_tf.ops import Sum, push_pull


def _global_moments(inputs, axes, keepdims, name, mask=None):
    """Mean and variance over `axes` of every worker's `inputs` (weighted by `mask`, broadcast to inputs)."""
    dtype = tf.float32 if inputs.dtype in (tf.float16, tf.bfloat16) else inputs.dtype
    x = tf.cast(inputs, dtype)
    weights = tf.ones_like(x) if mask is None else tf.broadcast_to(tf.cast(mask, dtype), tf.shape(x))
    count = tf.reduce_sum(weights, axes, keepdims=True)
    total = tf.reduce_sum(x * weights, axes, keepdims=True)
    squares = tf.reduce_sum(tf.square(x) * weights, axes, keepdims=True)
    stats_shape = tf.shape(total)
    stacked = tf.stack([tf.reshape(count, [-1]), tf.reshape(total, [-1]), tf.reshape(squares, [-1])])
    # Eagerly one name per layer serves every step; in a graph the op's own name is unique and deterministic.
    summed = push_pull(stacked, name=name if tf.executing_eagerly() else None, op=Sum)
    count, total, squares = [tf.reshape(summed[i], stats_shape) for i in range(3)]
    count = tf.maximum(count, tf.ones_like(count))
    mean = total / count
    variance = tf.maximum(squares / count - tf.square(mean), tf.zeros_like(mean))
    if not keepdims:
        mean, variance = tf.squeeze(mean, axes), tf.squeeze(variance, axes)
    return tf.cast(mean, inputs.dtype), tf.cast(variance, inputs.dtype)


@functools.cache  # one class, so that isinstance() and Keras's registry see the same one
def _keras3_class():
    import keras

    compat.check(compat.HOROVOD_API, "keras")

    @keras.saving.register_keras_serializable(package="bps_tf")
    class SyncBatchNormalization(keras.layers.BatchNormalization):
        """keras.layers.BatchNormalization with batch statistics over every worker's batch."""

        def _moments(self, inputs, mask):
            if mask is not None:
                mask = tf.expand_dims(mask, -1)
            return _global_moments(inputs, self._reduction_axes, False, f"sync_batch_norm.{self.name}", mask)

    return SyncBatchNormalization


@functools.cache
def _keras2_class():
    keras2 = compat.keras2()
    compat.check(compat.HOROVOD_API, "tf_keras")

    @keras2.utils.register_keras_serializable(package="bps_tf")
    class SyncBatchNormalization(keras2.layers.BatchNormalization):
        """Keras 2's BatchNormalization with batch statistics over every worker's batch."""

        def __init__(self, fused=False, **kwargs):
            if fused:
                raise ValueError("SyncBatchNormalization does not support fused=True (the fused kernel computes "
                                 "its statistics itself)")
            super().__init__(fused=False, **kwargs)

        def _calculate_mean_and_var(self, inputs, reduction_axes, keep_dims, mask=None):
            return _global_moments(inputs, reduction_axes, keep_dims, f"sync_batch_norm.{self.name}", mask)

    return SyncBatchNormalization


def sync_batch_normalization_class():
    """SyncBatchNormalization for the Keras that tf.keras resolves to."""
    return _keras2_class() if compat.keras_in_use() == "tf_keras" else _keras3_class()
