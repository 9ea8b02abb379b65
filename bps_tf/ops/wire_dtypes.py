"""The dtypes that travel: the servers reduce float16, bfloat16, float32, float64, int32 and int64; smaller
integers and bools travel widened (exact: a wrapped sum of int8s is the int32 sum cast back)."""

import tensorflow as tf

SUPPORTED_DTYPES = (tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int32, tf.int64)
_WIDENED = {tf.int8: tf.int32, tf.uint8: tf.int32, tf.int16: tf.int32, tf.uint16: tf.int32, tf.uint32: tf.int64,
            tf.bool: tf.int32}


def check_travels(dtype, what):
    """A ValueError naming the supported dtypes unless `dtype` can travel."""
    if dtype not in SUPPORTED_DTYPES and dtype not in _WIDENED:
        names = ", ".join(d.name for d in SUPPORTED_DTYPES + tuple(_WIDENED))
        raise ValueError(f"{what}: unsupported dtype {dtype.name}; supported: {names}")


def to_wire(tensor, what):
    """(the tensor as it travels, its own dtype if it was widened else None)."""
    check_travels(tensor.dtype, what)
    if tensor.dtype in SUPPORTED_DTYPES:
        return tensor, None
    return tf.cast(tensor, _WIDENED[tensor.dtype]), tensor.dtype


def from_wire(tensor, original):
    return tensor if original is None else tf.cast(tensor, original)
