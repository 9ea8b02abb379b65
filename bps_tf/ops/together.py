"""Collectives issued together: in eager mode each op would wait for its own result before the next one
starts, so a batch of them runs as one tf.function (traced once per batch) where they all overlap."""

import tensorflow as tf

_functions = {}


def in_one_function(key, build, tensors):
    """build(tensors) -> list of tensors (or None); `key` identifies the batch (its names and settings)."""
    if not tf.executing_eagerly():
        return build(tensors)
    if not tensors:
        return []
    function = _functions.get(key)
    if function is None:
        function = tf.function(build, autograph=False)
        _functions[key] = function
    return function(tensors)
