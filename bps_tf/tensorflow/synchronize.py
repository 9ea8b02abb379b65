"""synchronize_weights(): every worker holds the servers' weights, every change pushed (asynchronous
training); in synchronous training, where the workers' weights are always equal, a barrier."""

import tensorflow as tf

from bps_tf import process
from bps_tf.ops import async_weights
from bps_tf.process_sets import global_process_set
from bps_tf.tensorflow.basics import barrier


def synchronize_weights():
    """A collective: every worker calls it, eagerly (at the end of training, or before each evaluation).
    Asynchronous training (BYTEPS_ENABLE_ASYNC, BYTEPS_STALENESS): each worker pushes the changes it still
    holds (a DistributedGradientTape's last step); once every worker has, each takes the servers' weights into
    every variable trained asynchronously (DistributedOptimizer, DistributedGradientTape, BytePSStrategy), so
    that all workers hold the same weights, the initial ones plus every change any worker made."""
    if not tf.executing_eagerly():
        raise ValueError("synchronize_weights() waits for every worker: call it eagerly, outside tf.function")
    holders = async_weights.every_holder() if process.is_async() else []
    for holder in holders:
        holder.push_pending()
    barrier(global_process_set)
    for holder in holders:
        holder.pull()
