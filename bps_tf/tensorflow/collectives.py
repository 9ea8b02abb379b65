"""Horovod's collectives under their own names, signatures, defaults and gradients, built on bps_tf.ops:
allreduce (BytePS's push_pull with Horovod's arguments), allgather, alltoall, reducescatter, their grouped
forms, and broadcast_."""

import contextlib

import tensorflow as tf

from bps_tf import process_sets
from bps_tf.ops import (
    Adasum, Average, Compression, Sum, all_gather, broadcast, check_op, naming, push_pull, push_pull_slices,
    row_counts,
)
from bps_tf.process_sets import global_process_set
from bps_tf.ops.together import in_one_function


def resolve_op(op, average, what):
    """Horovod's deprecated `average` flag: True means Average, False Sum; `op` wins when both are given."""
    if op is not None and average is not None:
        raise ValueError(f"{what}: pass op= or the deprecated average=, not both")
    if op is None:
        op = Sum if average is False else Average
    check_op(op, what)
    return op


def _on(device):
    return tf.device(device) if device else contextlib.nullcontext()


def _label(tensor, name, kind, ignore_name_scope, index=None):
    """The name a collective's tensors are declared under (see naming.tensor_name); `index` tells apart the
    members of a group."""
    if index is not None and name:
        name = f"{name}.{index}"
    label = naming.tensor_name(tensor, name, kind, with_shape=False, ignore_name_scope=ignore_name_scope)
    if index is not None and not name and tf.executing_eagerly():
        label = f"{label}.{index}"  # eagerly, one call site names every member of the group
    return label


def allreduce(tensor, average=None, device_dense="", device_sparse="", compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, name=None, process_set=global_process_set,
              ignore_name_scope=False):
    """`tensor` (a tf.Tensor, tf.Variable or tf.IndexedSlices) reduced across workers: Average (default),
    Sum, Min, Max or Product. IndexedSlices are gathered (Sum or Average only, no scaling)."""
    op = resolve_op(op, average, f"allreduce of '{name or 'tensor'}'")
    if isinstance(tensor, tf.IndexedSlices):
        if prescale_factor != 1.0 or postscale_factor != 1.0:
            raise NotImplementedError("allreduce of tf.IndexedSlices: prescale_factor and postscale_factor are not "
                                      "supported; scale the values yourself")
        with _on(device_sparse):
            label = _label(tensor.values, name, "allreduce.sparse", ignore_name_scope)
            return push_pull_slices([tensor], label, op, process_set=process_set)
    with _on(device_dense):
        return push_pull(tensor, name=name, op=op, compression=compression, prescale_factor=prescale_factor,
                         postscale_factor=postscale_factor, process_set=process_set,
                         ignore_name_scope=ignore_name_scope)


def grouped_allreduce(tensors, average=None, device_dense="", device_sparse="", compression=Compression.none,
                      op=None, prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set,
                      ignore_name_scope=False, name=None):
    """allreduce of every tensor in the list, all in flight together."""
    op = resolve_op(op, average, "grouped_allreduce")
    tensors = [t if isinstance(t, tf.IndexedSlices) else tf.convert_to_tensor(t) for t in tensors]
    names = [_label(t.values if isinstance(t, tf.IndexedSlices) else t, name, "grouped_allreduce",
                    ignore_name_scope, i) for i, t in enumerate(tensors)]

    def reduce_all(values):
        return [allreduce(t, op=op, device_dense=device_dense, device_sparse=device_sparse, compression=compression,
                          prescale_factor=prescale_factor, postscale_factor=postscale_factor, name=n,
                          process_set=process_set, ignore_name_scope=True) for t, n in zip(values, names)]

    key = ("grouped_allreduce", tuple(names), op, compression, prescale_factor, postscale_factor, process_set)
    return in_one_function(key, reduce_all, tensors)


def allgather(tensor, name=None, ignore_name_scope=False, process_set=global_process_set):
    """Every worker's `tensor` concatenated along the first dimension, in rank order (first dimensions may
    differ). Its gradient, as in Horovod, is this worker's rows of the gradients averaged over the workers."""
    tensor = tf.convert_to_tensor(tensor)
    label = _label(tensor, name, "allgather", ignore_name_scope)
    if tensor.shape.rank == 0:
        tensor = tf.reshape(tensor, [1])
    return _allgather_with_gradient(tensor, label, process_set)


def _allgather_with_gradient(tensor, label, process_set):
    @tf.custom_gradient
    def gather(rows):
        gathered = all_gather(rows, 0, label, process_set=process_set)

        def gradient(upstream):
            mean = push_pull(upstream, name=f"{label}/grad", op=Average, shape_in_name=True, process_set=process_set)
            counts = row_counts(tf.shape(rows, out_type=tf.int64)[0], f"{label}/grad", process_set=process_set)
            before = tf.reduce_sum(counts[:process_sets.position(process_set)])
            return mean[before:before + tf.shape(rows, out_type=tf.int64)[0]]

        return gathered, gradient

    return gather(tensor)


def grouped_allgather(tensors, name=None, ignore_name_scope=False, process_set=global_process_set):
    """allgather of every tensor in the list, all in flight together."""
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    names = [_label(t, name, "grouped_allgather", ignore_name_scope, i) for i, t in enumerate(tensors)]

    def gather_all(values):
        return [_allgather_with_gradient(t if t.shape.rank else tf.reshape(t, [1]), n, process_set)
                for t, n in zip(values, names)]

    return in_one_function(("grouped_allgather", tuple(names), process_set), gather_all, tensors)


def alltoall(tensor, splits=None, name=None, ignore_name_scope=False, process_set=global_process_set):
    """Sends `splits[j]` rows of `tensor` (in order) to the j-th worker of the set and returns the rows
    received from every worker, in rank order; without `splits` the first dimension is split evenly. With
    `splits`, also returns how many rows came from each worker.

    Through parameter servers every worker's whole tensor reaches every worker (each keeps its part): the
    bytes moved are the set's size times a direct exchange's, fine for the small exchanges this is used for.
    """
    tensor = tf.convert_to_tensor(tensor)
    if tensor.shape.rank == 0:
        raise ValueError("alltoall needs a tensor with a first dimension")
    label = _label(tensor, name, "alltoall", ignore_name_scope)
    count = process_sets.set_size(process_set)
    me = process_sets.position(process_set)
    rows = tf.shape(tensor, out_type=tf.int64)[0]
    if splits is None:
        with tf.control_dependencies([tf.debugging.assert_equal(
                rows % count, tf.constant(0, tf.int64),
                message=f"alltoall of '{label}': without splits the first dimension must divide by {count}")]):
            send = tf.fill([count], rows // count)
    else:
        send = tf.cast(tf.reshape(splits, [-1]), tf.int64)
        checks = [tf.debugging.assert_equal(tf.size(send, out_type=tf.int64), tf.constant(count, tf.int64),
                                            message=f"alltoall of '{label}': splits needs one entry per worker"),
                  tf.debugging.assert_equal(tf.reduce_sum(send), rows,
                                            message=f"alltoall of '{label}': splits must add up to the first dimension")]
        with tf.control_dependencies(checks):
            send = tf.identity(send)
    # matrix[i][j]: rows worker i sends worker j.
    with tf.device("/cpu:0"):
        matrix = tf.reshape(push_pull(tf.scatter_nd([[me]], [send], [count, count]), name=f"{label}/splits", op=Sum,
                                      process_set=process_set), [count, count])
    gathered = all_gather(tensor, 0, f"{label}/data", process_set=process_set)
    block_starts = tf.cumsum(tf.reduce_sum(matrix, axis=1), exclusive=True)
    offsets_in_block = tf.reduce_sum(matrix[:, :me], axis=1)
    received = matrix[:, me]
    indices = tf.ragged.range(block_starts + offsets_in_block, block_starts + offsets_in_block + received).flat_values
    output = tf.gather(gathered, indices)
    if splits is None:
        return output
    return output, tf.cast(received, tf.convert_to_tensor(splits).dtype)


def _reducescatter_rows(rows, count, position):
    """(first row, rows) of this worker's part: the first `rows % count` workers get one row more."""
    base, extra = rows // count, rows % count
    start = position * base + tf.minimum(tf.cast(position, rows.dtype), extra)
    return start, base + tf.cast(position < extra, rows.dtype)


def reducescatter(tensor, device_dense="", compression=Compression.none, op=Average, name=None,
                  process_set=global_process_set, ignore_name_scope=False, prescale_factor=1.0, postscale_factor=1.0):
    """`tensor` reduced across workers (Average or Sum), of which each worker returns its part of the first
    dimension (the first `dim0 % size` workers one row more). Its gradient, as in Horovod, is the upstream
    gradients gathered (times the set's size for Sum, times the scale factors)."""
    if op not in (Average, Sum):
        raise ValueError(f"reducescatter reduces with bps.Average or bps.Sum, not {op!r}")
    tensor = tf.convert_to_tensor(tensor)
    if tensor.shape.rank == 0:
        raise ValueError("reducescatter needs a tensor with a first dimension")
    label = _label(tensor, name, "reducescatter", ignore_name_scope)
    return _reducescatter_with_gradient(tensor, label, op, compression, process_set, prescale_factor,
                                        postscale_factor, device_dense)


def _reducescatter_with_gradient(tensor, label, op, compression, process_set, prescale_factor, postscale_factor,
                                 device_dense=""):
    count = process_sets.set_size(process_set)

    @tf.custom_gradient
    def reduce_scatter(value):
        with _on(device_dense):
            reduced = push_pull(value, name=label, op=op, compression=compression, prescale_factor=prescale_factor,
                                postscale_factor=postscale_factor, process_set=process_set)
        start, length = _reducescatter_rows(tf.shape(value, out_type=tf.int64)[0], count,
                                            process_sets.position(process_set))

        def gradient(upstream):
            scale = (count if op == Sum else 1) * prescale_factor * postscale_factor
            scaled = upstream * tf.cast(scale, upstream.dtype) if scale != 1 else upstream
            return all_gather(scaled, 0, f"{label}/grad", process_set=process_set)

        return reduced[start:start + length], gradient

    return reduce_scatter(tensor)


def grouped_reducescatter(tensors, device_dense="", compression=Compression.none, op=Average, name=None,
                          process_set=global_process_set, ignore_name_scope=False, prescale_factor=1.0,
                          postscale_factor=1.0):
    """reducescatter of every tensor in the list, all in flight together."""
    if op not in (Average, Sum):
        raise ValueError(f"grouped_reducescatter reduces with bps.Average or bps.Sum, not {op!r}")
    tensors = [tf.convert_to_tensor(t) for t in tensors]
    names = [_label(t, name, "grouped_reducescatter", ignore_name_scope, i) for i, t in enumerate(tensors)]

    def scatter_all(values):
        return [_reducescatter_with_gradient(t, n, op, compression, process_set, prescale_factor, postscale_factor,
                                             device_dense) for t, n in zip(values, names)]

    key = ("grouped_reducescatter", tuple(names), op, compression, process_set, prescale_factor, postscale_factor)
    return in_one_function(key, scatter_all, tensors)


def broadcast_(variables, root_rank, name=None, process_set=global_process_set):
    """Sets each variable to its value on `root_rank`, in place; returns the variables."""
    variables = list(variables)
    for index, variable in enumerate(variables):
        label = f"{name}.{index}" if name else f"broadcast_.{index}.{getattr(variable, 'path', None) or variable.name}"
        variable.assign(broadcast(variable, root_rank, name=label, process_set=process_set))
    return variables


__all__ = ["Adasum", "allreduce", "grouped_allreduce", "allgather", "grouped_allgather", "alltoall", "reducescatter",
           "grouped_reducescatter", "broadcast_", "resolve_op"]
