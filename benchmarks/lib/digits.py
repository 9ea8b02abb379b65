"""The time-to-accuracy task: scikit-learn's digits (examples/digits_data.py) and the two models trained on
it, a wide 64-2048-2048-10 perceptron (17.4 MB of gradients) and the BERT-like encoder of the training
benchmark (lib/models.py) made smaller, reading an image as a sequence of its 64 pixel intensities (tokens
0..16) and classifying it from the first position. Used by workers/accuracy.py and ablations/onebit_adam.py."""

import numpy as np

WIDTH = 2048  # 64-2048-2048-10: 4.3 M parameters, 17.4 MB of float32 gradients per step
ENCODER = dict(vocab=17, seq=64, hidden=128, heads=4, ffn=512, layers=2, classes=10)


def load(rank, size):
    """examples/digits_data.py's split (scikit-learn is imported only here, when the data is wanted)."""
    from examples.digits_data import load as load_digits

    return load_digits(rank=rank, size=size)


def build(tf, model):
    """The model "mlp" or "encoder", with Keras's random seed 0."""
    tf.keras.utils.set_random_seed(0)
    if model == "encoder":
        from benchmarks.lib import models

        return models.bert(**ENCODER)
    return tf.keras.Sequential([tf.keras.Input((64,)), tf.keras.layers.Dense(WIDTH, activation="relu"),
                                tf.keras.layers.Dense(WIDTH, activation="relu"), tf.keras.layers.Dense(10)])


def inputs_for(model, x):
    """The encoder reads pixel intensities 0..16 as tokens; the MLP the scaled pixels."""
    return np.rint(x * 16).astype(np.int32) if model == "encoder" else x
