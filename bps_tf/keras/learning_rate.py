"""Reading and setting an optimizer's learning rate and momentum, the same way for Keras 3 and tf-keras."""

import numpy as np


def _value(variable_or_value):
    return float(np.asarray(variable_or_value.numpy() if hasattr(variable_or_value, "numpy") else variable_or_value))


def _set(optimizer, attribute, value):
    current = getattr(optimizer, attribute)
    if hasattr(current, "assign"):  # a variable (Keras 3, tf-keras)
        current.assign(value)
    else:
        setattr(optimizer, attribute, value)


def get_learning_rate(optimizer):
    return _value(optimizer.learning_rate)


def set_learning_rate(optimizer, value):
    _set(optimizer, "learning_rate", value)


def get_momentum(optimizer):
    momentum = getattr(optimizer, "momentum", None)
    return None if momentum is None else _value(momentum)


def set_momentum(optimizer, value):
    _set(optimizer, "momentum", value)
