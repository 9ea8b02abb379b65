"""The time-to-accuracy task: scikit-learn's digits (testing/digits.py) and the two models trained on
it, a wide 64-2048-2048-10 perceptron (17.4 MB of gradients) and the BERT-like encoder of the training
benchmark (testing/models.py) made smaller, reading an image as a sequence of its 64 pixel intensities (tokens
0..16) and classifying it from the first position. Used by workers/accuracy.py and ablations/onebit_adam.py."""

import numpy as np

from testing import models
from testing.digits import load  # noqa: F401 (the task's data, for the workers)

WIDTH = 2048  # 64-2048-2048-10: 4.3 M parameters, 17.4 MB of float32 gradients per step
ENCODER = dict(vocab=17, seq=64, hidden=128, heads=4, ffn=512, layers=2, classes=10)


def build(tf, model):
    """The model "mlp" or "encoder", with Keras's random seed 0."""
    tf.keras.utils.set_random_seed(0)
    if model == "encoder":
        return models.encoder(tf.keras, **ENCODER)
    return models.mlp(tf.keras, inputs=64, width=WIDTH, layers=2, classes=10)


def inputs_for(model, x):
    """The encoder reads pixel intensities 0..16 as tokens; the MLP the scaled pixels."""
    return np.rint(x * 16).astype(np.int32) if model == "encoder" else x
