"""Reducing a list of gradients across workers: named after their variables, prioritised so that layers
nearer the input (listed first) go first, and all in flight together."""

import tensorflow as tf

from bps_tf.ops import gather_is_smaller, push_pull, push_pull_slices


def _variable_label(variable, index):
    label = getattr(variable, "path", None) or getattr(variable, "name", None) or "tensor"
    return f"{index}.{label}"


def _reduce_one(gradient, name, compression, op, priority):
    if gradient is None:
        return None
    if isinstance(gradient, tf.IndexedSlices):
        return push_pull_slices([gradient], name, op, priority)
    return push_pull(gradient, name=name, op=op, compression=compression, priority=priority)


def _reduce_all(gradients, names, compression, op):
    count = len(gradients)
    return [_reduce_one(g, n, compression, op, count - i) for i, (g, n) in enumerate(zip(gradients, names))]


def _prepared(gradient, sparse_as_dense):
    """Sparse gradients stay sparse (their rows are gathered) unless densifying them sends fewer bytes."""
    if gradient is None:
        return None
    if isinstance(gradient, tf.IndexedSlices) and not sparse_as_dense and gather_is_smaller([gradient]):
        return gradient
    return tf.convert_to_tensor(gradient)


_eager_functions = {}


def push_pull_gradients(gradients, variables, scope, compression, op, sparse_as_dense=False):
    """push_pull of each gradient (None stays None), named `scope/<index>.<variable>`."""
    names = [f"{scope}/{_variable_label(v, i)}" for i, v in enumerate(variables)]
    gradients = [_prepared(g, sparse_as_dense) for g in gradients]
    if not tf.executing_eagerly():
        return _reduce_all(gradients, names, compression, op)
    # Eagerly, each op would wait for its own result; inside one function they all overlap.
    present = [i for i, g in enumerate(gradients) if g is not None]
    key = (tuple(names[i] for i in present), compression, op)
    function = _eager_functions.get(key)
    if function is None:
        function = tf.function(lambda gs: _reduce_all(gs, key[0], compression, op), autograph=False)
        _eager_functions[key] = function
    reduced = function([gradients[i] for i in present]) if present else []
    result = list(gradients)
    for i, value in zip(present, reduced):
        result[i] = value
    return result
