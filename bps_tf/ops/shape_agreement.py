"""Checking that every worker reduces tensors of one shape, before a reduction whose workers' shapes may
differ (a batch split unevenly). A push_pull is named after its shape where shapes can change, so workers
with different shapes would push different tensors and wait for each other until BYTEPS_TIMEOUT; this check
fails at once on every worker instead, naming the shapes.

Each worker sends its dimensions and their negatives through one Max reduction of a fixed size (the same
in every generation of an elastic job): the largest and smallest of every dimension across workers, equal
exactly when every worker's shape is the same.
"""

import tensorflow as tf

from bps_tf.ops import naming
from bps_tf.ops.library import ops

LIKELY_CAUSE = (
    "A reduction needs the same shape on every worker. Batches of different sizes cause this: a global batch "
    "that does not divide by the number of replicas (32 over 3 workers: 11, 11, 10), or a last partial batch.")
STRATEGY_REMEDY = ("Reduce over the batch axis instead (strategy.reduce(op, value, axis=0)), gather the values "
                   "(strategy.gather), or reduce per-example values to a scalar before reducing across workers.")
HOROVOD_REMEDY = ("Gather per-example values instead (allgather), or reduce them to a sum and a count of examples "
                  "before reducing those across workers.")


def _dimensions(local_tensors):
    return tf.concat([tf.shape(t, out_type=tf.int64) for t in local_tensors], 0)


def _bounds(local_tensors, name, members):
    """(smallest, largest) of every dimension of these local tensors across workers (`members`: the ranks of
    a process set, empty for all)."""
    dims = _dimensions(local_tensors)
    with tf.device("/cpu:0"):
        extremes = ops.byteps_push_pull(tf.concat([dims, -dims], 0), tensor_name=name, reduce_op="max",
                                        process_set=members)
    half = tf.shape(dims)[0]
    return -extremes[half:], extremes[:half]


def _shape_text(dims, count):
    """'[11, 64]' for one local tensor, '[11, 64], [11, 64]' for several (dims: the flat list)."""
    rank = len(dims) // count
    return ", ".join("[" + ", ".join(str(d) for d in dims[i * rank:(i + 1) * rank]) + "]" for i in range(count))


def _ranges_text(smallest, largest, count):
    rank = len(smallest) // count
    parts = [f"{lo}" if lo == hi else f"{lo} to {hi}" for lo, hi in zip(smallest, largest)]
    return ", ".join("[" + ", ".join(parts[i * rank:(i + 1) * rank]) + "]" for i in range(count))


def message(what, mine, smallest, largest, count, remedy):
    return (f"{what}: the workers' tensors differ in shape (this worker's: {_shape_text(mine, count)}; across "
            f"workers: {_ranges_text(smallest, largest, count)}). {LIKELY_CAUSE} {remedy}")


def needs_check(tensor):
    """Tensors of rank 1 or more may have another shape elsewhere; scalars cannot (nor can an unknown rank
    be checked with a name every worker agrees on)."""
    return bool(tensor.shape.rank)


def check(local_tensors, name, what, remedy, members=()):
    """Raises ValueError on every worker (of the process set whose ranks are `members`, empty for all),
    eagerly, if these local tensors' shapes differ from other workers'; in a graph returns an op that fails
    so (run the reduction after it), else None. `name`: the same on every worker whatever the shapes
    (None: derived from the graph tensor or the calling code); `remedy`: what to do instead, for the
    message."""
    # The check's own size (rank x local tensors) is in its name: one eager name serves tensors of any rank.
    size = 2 * len(local_tensors) * local_tensors[0].shape.rank
    kind = "shapes" + "".join(f".{r}" for r in members)
    name = f"{naming.tensor_name(local_tensors[0], name, kind, with_shape=False)}.dims{size}"
    smallest, largest = _bounds(local_tensors, name, list(members))
    if tf.executing_eagerly():
        if not bool(tf.reduce_all(tf.equal(smallest, largest))):
            raise ValueError(message(what, _dimensions(local_tensors).numpy().tolist(), smallest.numpy().tolist(),
                                     largest.numpy().tolist(), len(local_tensors), remedy))
        return None
    mine = _dimensions(local_tensors)
    return tf.debugging.Assert(tf.reduce_all(tf.equal(smallest, largest)), [
        f"{what}: the workers' tensors differ in shape (this worker's dimensions, then the smallest and largest "
        "of each across workers, follow).", mine, smallest, largest, f"{LIKELY_CAUSE} {remedy}"], summarize=64)
