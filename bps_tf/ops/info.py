"""What the op library was built with, and the job's shape read when a graph runs."""

import functools

import tensorflow as tf

from bps_tf.ops.library import ops


@functools.lru_cache(maxsize=None)
def build_info():
    """The features compiled into the op library: a set of 'cuda', 'nccl', 'xla'."""
    # In a graph of its own, so that it answers in eager and in TF1 graph mode alike.
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        return frozenset(session.run(ops.byteps_build_info()).decode().split())


def worker_info(field, name=None):
    """An int32 scalar op: 'rank', 'size', 'local_rank' or 'local_size', read when it runs."""
    return ops.byteps_worker_info(field=field, name=name)
