"""Concatenating every worker's tensor through the parameter servers, and sparse gradients with it.

A parameter server sums; a concatenation is a sum when each worker places its part at its own offset in
zeros of the whole. The parts may differ in length: one small exchange of lengths comes first.

Sparse gradients (tf.IndexedSlices, an embedding's) are summed by concatenating their rows and indices,
as TensorFlow's own collectives do, when that moves fewer bytes than the dense tensor would.
"""

import tensorflow as tf

from bps_tf.ops.library import ops
from bps_tf.ops.collectives import Average, Sum, push_pull
from bps_tf.process import rank, size


def _offsets(length, name, priority):
    """(rows before this worker's, rows of all workers) in the rank-ordered concatenation of every worker's rows."""
    counts = push_pull(tf.scatter_nd([[rank()]], [length], [size()]), name=f"{name}/counts", op=Sum,
                       priority=priority)
    return tf.reduce_sum(counts[:rank()]), tf.reduce_sum(counts)


def _gather_rows(rows, before, total, name, priority):
    """Every worker's `rows` concatenated along axis 0; this worker's start at row `before` of `total`."""
    return ops.byteps_gather(rows, before, total, tensor_name=f"gather.{name}", priority=int(priority))


@tf.RegisterGradient("BytepsGather")
def _gather_grad(op, grad):
    """Each worker's rows fed every worker's output: their gradient is the sum of the gradients at their rows."""
    rows, before = op.inputs[0], op.inputs[1]
    summed = push_pull(grad, name=op.get_attr("tensor_name").decode() + "/grad", op=Sum,
                       priority=op.get_attr("priority"), shape_in_name=True)
    return summed[before:before + tf.shape(rows, out_type=tf.int64)[0]], None, None


def all_gather(tensor, axis, name, priority=0):
    """Concatenation along `axis` of every worker's `tensor`, in rank order (lengths along `axis` may differ)."""
    axis = axis % tensor.shape.rank
    before, total = _offsets(tf.shape(tensor, out_type=tf.int64)[axis], name, priority)
    if axis == 0:
        return _gather_rows(tensor, before, total, f"{name}/data", priority)
    to_front = [axis] + [d for d in range(tensor.shape.rank) if d != axis]
    gathered = _gather_rows(tf.transpose(tensor, to_front), before, total, f"{name}/data", priority)
    return tf.transpose(gathered, tf.math.invert_permutation(to_front))


def gather_is_smaller(local_slices):
    """Whether gathering every worker's rows (this process's `local_slices` together) moves fewer bytes than
    the dense gradient. Unknown row counts gather (an embedding's rows are usually far fewer than its table's)."""
    rows = [s.values.shape[0] if s.values.shape.rank else None for s in local_slices]
    table_rows = tf.get_static_value(local_slices[0].dense_shape)
    if None in rows or table_rows is None:
        return True
    return size() * sum(rows) < table_rows[0]


def push_pull_slices(local_slices, name, op=Sum, priority=0, replicas=None):
    """Sum (op=Sum) or mean (op=Average, over `replicas`, default: workers) of IndexedSlices across workers,
    as IndexedSlices: every worker's rows and indices (this process's `local_slices` first concatenated)."""
    values = tf.concat([s.values for s in local_slices], 0)
    indices = tf.concat([tf.cast(s.indices, tf.int64) for s in local_slices], 0)
    before, total = _offsets(tf.shape(indices, out_type=tf.int64)[0], name, priority)
    values = _gather_rows(values, before, total, f"{name}/values", priority)
    indices = _gather_rows(indices, before, total, f"{name}/indices", priority)
    if op == Average:
        values = values / tf.cast(replicas or size(), values.dtype)
    return tf.IndexedSlices(values, indices, local_slices[0].dense_shape)
