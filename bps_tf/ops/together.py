"""Collectives issued together: in eager mode each op would wait for its own result before the next one
starts, so a batch of them runs as one tf.function (traced once per batch) where they all overlap."""

import functools

import tensorflow as tf

_functions = {}


def function_of_its_own(build):
    """tf.function(build), traced once for its own batch. TensorFlow counts traces by a function's code, so
    many such functions built from one lambda would read as excessive retracing of one function; a partial
    object has no code of its own and is counted alone."""
    return tf.function(functools.partial(build), autograph=False)


def in_one_function(key, build, tensors):
    """build(tensors) -> list of tensors (or None); `key` identifies the batch (its names and settings)."""
    if not tf.executing_eagerly():
        return build(tensors)
    if not tensors:
        return []
    function = _functions.get(key)
    if function is None:
        function = function_of_its_own(build)
        _functions[key] = function
    return function(tensors)
