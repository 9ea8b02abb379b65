"""Knowing a variable across the APIs that hand it over: a Keras 3 variable holds a tf.Variable, and its
optimizer and a GradientTape may see either."""

import tensorflow as tf


def held_variable(variable):
    """The tf.Variable behind `variable` (itself, or the one a Keras 3 variable holds: `_value`, since inside
    an autocast scope `value` is a cast copy)."""
    if isinstance(variable, tf.Variable):
        return variable
    for attribute in ("_value", "value"):
        held = getattr(variable, attribute, None)
        if isinstance(held, tf.Variable):
            return held
    return variable


def variable_key(variable):
    """A hashable identity of a tf.Variable or Keras 3 variable (neither hashes by identity itself)."""
    variable = held_variable(variable)
    return variable.ref() if hasattr(variable, "ref") else ("object", id(variable))
