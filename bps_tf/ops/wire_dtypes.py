"""The dtypes that travel: the servers reduce float16, bfloat16, float32, float64, int32 and int64; smaller
integers and bools travel widened (exact: a wrapped sum of int8s is the int32 sum cast back)."""

import tensorflow as tf

SUPPORTED_DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int32, tf.int64)
_WIDENED = {tf.int8: tf.int32, tf.uint8: tf.int32, tf.int16: tf.int32, tf.uint16: tf.int32, tf.uint32: tf.int64,
            tf.bool: tf.int32}


def to_wire(tensor, what):
    """(the tensor as it travels, its own dtype if it was widened else None)."""
    if tensor.dtype in SUPPORTED_DTYPES:
        return tensor, None
    if tensor.dtype in _WIDENED:
        return tf.cast(tensor, _WIDENED[tensor.dtype]), tensor.dtype
    names = ", ".join(d.name for d in SUPPORTED_DTYPES + tuple(_WIDENED))
    raise ValueError(f"{what}: unsupported dtype {tensor.dtype.name}; supported: {names}")


def from_wire(tensor, original):
    return tensor if original is None else tf.cast(tensor, original)
