"""Horovod's elastic training is not offered: importing this module says so (see not_offered.py)."""

from bps_tf.tensorflow.not_offered import not_offered

not_offered("bps_tf.tensorflow", "elastic")
