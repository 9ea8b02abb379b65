"""The tf.distribute integration of bps_tf."""

from bps_tf.strategy.strategy import BytePSStrategy

__all__ = ["BytePSStrategy"]
