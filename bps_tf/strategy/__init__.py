"""The tf.distribute integration of bps_tf: BytePSStrategy. Built on bps_tf.ops; independent of the
Horovod-compatible API. Importing it checks the private TensorFlow and Keras API it overrides
(bps_tf.compat)."""

from bps_tf.strategy.strategy import BytePSStrategy

__all__ = ["BytePSStrategy"]
