"""Gradient compression on the wire: none, or float16 (the original dtype comes back)."""

import tensorflow as tf


class NoneCompressor:
    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, context):
        return tensor


class FP16Compressor:
    """Floating tensors travel as float16; others unchanged."""

    @staticmethod
    def compress(tensor):
        if tensor.dtype.is_floating and tensor.dtype != tf.float16:
            return tf.cast(tensor, tf.float16), tensor.dtype
        return tensor, None

    @staticmethod
    def decompress(tensor, context):
        return tensor if context is None else tf.cast(tensor, context)


class Compression:
    none = NoneCompressor
    fp16 = FP16Compressor
