"""bps_tf.plan: a model of one synchronous training step under bps_tf (and under a ring all-reduce) and a
planner built on it: how long communication takes with S servers, and how many servers, what partition
size and what min spread a cluster needs. No TensorFlow unless a saved Keras model is read (keras_model.py).

    python -m bps_tf.plan --machines 4 --gpus-per-machine 8 --link 100gbit --model bert-large

Modules: parameters (the measured constants and where each was measured), cluster (the machines and links),
partitions (what the scheduler's partition planner does with a step's gradients), step_model (the times),
workloads (BERT-large, ResNet-50), recommend (servers, partition size and min spread), keras_model, cli.
"""

from bps_tf.plan.cluster import Cluster, rate_bytes_per_s
from bps_tf.plan.parameters import MEASURED, Parameters
from bps_tf.plan.step_model import push_pull_time, ring_all_reduce_time, step_time

__all__ = ["Cluster", "MEASURED", "Parameters", "push_pull_time", "rate_bytes_per_s", "ring_all_reduce_time",
           "step_time"]
