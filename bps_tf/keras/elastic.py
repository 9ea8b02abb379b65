"""Horovod's elastic Keras training is not offered: importing this module says so."""

from bps_tf.tensorflow.not_offered import not_offered

not_offered("bps_tf.keras", "elastic")
