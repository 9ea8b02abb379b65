"""Reducing a list of gradients across workers: named after their variables, prioritised so that layers
nearer the input (listed first) go first, and all in flight together."""

import tensorflow as tf

from bps_tf.tensorflow.ops import push_pull


def _variable_label(variable, index):
    label = getattr(variable, "path", None) or getattr(variable, "name", None) or "tensor"
    return f"{index}.{label}"


def _reduce_all(gradients, names, compression, op):
    count = len(gradients)
    return [
        None if g is None else push_pull(g, name=n, op=op, compression=compression, priority=count - i)
        for i, (g, n) in enumerate(zip(gradients, names))
    ]


_eager_functions = {}


def push_pull_gradients(gradients, variables, scope, compression, op):
    """push_pull of each gradient (None stays None), named `scope/<index>.<variable>`."""
    names = [f"{scope}/{_variable_label(v, i)}" for i, v in enumerate(variables)]
    gradients = [None if g is None else tf.convert_to_tensor(g) for g in gradients]
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
