"""Concatenating every worker's tensor through the parameter servers, and sparse gradients with it.

A parameter server sums; a concatenation is a sum when each worker places its part at its own offset in
zeros of the whole. The parts may differ in length: one small exchange of lengths comes first.

Sparse gradients (tf.IndexedSlices, an embedding's) are summed by concatenating their rows and indices,
as TensorFlow's own collectives do, when that moves fewer bytes than the dense tensor would.
"""

import contextlib

import tensorflow as tf

from bps_tf import process_sets
from bps_tf.ops.library import ops
from bps_tf.ops.collectives import Average, Sum, push_pull, set_label
from bps_tf.ops.wire_dtypes import from_wire, to_wire
from bps_tf.process import is_elastic, size


def row_counts(length, name, priority=0, process_set=None):
    """Every member's `length` (a scalar int64 tensor), in rank order, as one int64 vector."""
    mine = tf.scatter_nd([[process_sets.position(process_set)]], [tf.cast(length, tf.int64)],
                         [process_sets.set_size(process_set)])
    return push_pull(mine, name=f"{name}/counts", op=Sum, priority=priority, process_set=process_set)


def _offsets(length, name, priority, process_set=None):
    """(rows before this worker's, rows of all workers) in the rank-ordered concatenation of every worker's rows."""
    counts = row_counts(length, name, priority, process_set)
    return tf.reduce_sum(counts[:process_sets.position(process_set)]), tf.reduce_sum(counts)


def _gather_rows(rows, before, total, name, priority, process_set=None):
    """Every worker's `rows` concatenated along axis 0; this worker's start at row `before` of `total`."""
    members = process_sets.members(process_set, f"gather of '{name}'")
    wire, original = to_wire(rows, f"gather of '{name}'")
    # A process set's gather runs on the CPU, as its push_pulls do; otherwise GPU rows stay on the GPU.
    with tf.device("/cpu:0") if members else contextlib.nullcontext():
        gathered = ops.byteps_gather(wire, before, total, tensor_name=f"gather{set_label(members)}.{name}",
                                     priority=int(priority), process_set=members)
    return from_wire(gathered, original)


@tf.RegisterGradient("BytepsGather")
def _gather_grad(op, grad):
    """Each worker's rows fed every worker's output: their gradient is the sum of the gradients at their rows."""
    rows, before = op.inputs[0], op.inputs[1]
    summed = ops.byteps_push_pull(grad, tensor_name=op.get_attr("tensor_name").decode() + "/grad",
                                  priority=op.get_attr("priority"), shape_in_name=True,
                                  process_set=op.get_attr("process_set"))
    return summed[before:before + tf.shape(rows, out_type=tf.int64)[0]], None, None


def all_gather(tensor, axis, name, priority=0, process_set=None):
    """Concatenation along `axis` of every worker's `tensor` (of `process_set`'s members), in rank order;
    lengths along `axis` may differ."""
    tensor = tf.convert_to_tensor(tensor)
    if tensor.shape.rank == 0:
        tensor = tf.reshape(tensor, [1])  # a scalar gathers as one row per worker
    axis = axis % tensor.shape.rank
    with tf.device("/cpu:0"):
        before, total = _offsets(tf.shape(tensor, out_type=tf.int64)[axis], name, priority, process_set)
    if axis == 0:
        return _gather_rows(tensor, before, total, f"{name}/data", priority, process_set)
    to_front = [axis] + [d for d in range(tensor.shape.rank) if d != axis]
    gathered = _gather_rows(tf.transpose(tensor, to_front), before, total, f"{name}/data", priority, process_set)
    return tf.transpose(gathered, tf.math.invert_permutation(to_front))


def gather_is_smaller(local_slices):
    """Whether gathering every worker's rows (this process's `local_slices` together) moves fewer bytes than
    the dense gradient. Unknown row counts gather (an embedding's rows are usually far fewer than its table's).
    Never in an elastic job."""
    if is_elastic():
        return False  # a gather is traced for one generation's ranks; a dense sum holds in every generation
    rows = [s.values.shape[0] if s.values.shape.rank else None for s in local_slices]
    table_rows = tf.get_static_value(local_slices[0].dense_shape)
    if None in rows or table_rows is None:
        return True
    return size() * sum(rows) < table_rows[0]


def push_pull_slices(local_slices, name, op=Sum, priority=0, replicas=None, process_set=None):
    """Sum (op=Sum) or mean (op=Average, over `replicas`, default: the workers taking part) of IndexedSlices
    across workers (or `process_set`'s members), as IndexedSlices: every worker's rows and indices (this
    process's `local_slices` first concatenated)."""
    if op not in (Sum, Average):
        raise ValueError(f"sparse gradients (IndexedSlices) of '{name}' are summed or averaged, not {op!r}; "
                         "pass sparse_as_dense=True for other ops")
    values = tf.concat([s.values for s in local_slices], 0)
    indices = tf.concat([tf.cast(s.indices, tf.int64) for s in local_slices], 0)
    before, total = _offsets(tf.shape(indices, out_type=tf.int64)[0], name, priority, process_set)
    values = _gather_rows(values, before, total, f"{name}/values", priority, process_set)
    indices = _gather_rows(indices, before, total, f"{name}/indices", priority, process_set)
    if op == Average:
        values = values / tf.cast(replicas or process_sets.set_size(process_set), values.dtype)
    return tf.IndexedSlices(values, indices, local_slices[0].dense_shape)
