"""Keras integration: `bps_tf.keras.callbacks` for Keras 3 and tf-keras, plus the optimizer wrapper.

The callbacks derive from tf.keras's Callback, which is Keras 3 by default and tf-keras when
TF_USE_LEGACY_KERAS=1 (as TensorFlow itself resolves tf.keras).
"""

from bps_tf.keras import callbacks
from bps_tf.ops import broadcast_variables
from bps_tf.tensorflow import DistributedOptimizer

__all__ = ["callbacks", "DistributedOptimizer", "broadcast_variables"]
