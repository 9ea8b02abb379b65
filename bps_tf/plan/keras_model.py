"""A saved Keras model's gradients: the bytes of each trainable variable. The only module of bps_tf.plan that
imports TensorFlow, and only when called."""


def gradient_bytes(path, element_bytes=None):
    """[bytes per trainable variable] of the model saved at `path` (.keras, .h5 or a SavedModel folder);
    element_bytes overrides the variables' own dtype size (e.g. 2 for gradients sent in 16 bits)."""
    import tensorflow as tf  # noqa: F401  (Keras needs its backend)
    import keras

    model = keras.models.load_model(path, compile=False)
    sizes = []
    for variable in model.trainable_weights:
        elements = 1
        for dim in variable.shape:
            elements *= int(dim)
        size = element_bytes or getattr(variable.dtype, "size", None) or _dtype_size(variable.dtype)
        sizes.append(elements * size)
    return sizes


def _dtype_size(dtype):
    import numpy as np

    return np.dtype(str(dtype)).itemsize
