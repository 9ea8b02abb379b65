"""The two models of the end-to-end benchmark (testing/models.py's builders), built with whichever Keras
`tf.keras` is (tf-keras here, through TF_USE_LEGACY_KERAS=1, since Keras 3 cannot run
MultiWorkerMirroredStrategy), and their synthetic data.

bert: a small BERT-like encoder classifying a sequence from its first token; dense gradients dominate (the
      embedding's are sparse, see docs).
mlp:  a wide multilayer perceptron: large dense layers, little compute per byte of gradient.
mlp-small: the same, 1024 wide (8.4 MB of gradients): a step that 8 workers on 2 cores train quickly.
"""

import tensorflow as tf

from testing import models

BERT = dict(vocab=8192, seq=128, hidden=256, heads=4, ffn=1024, layers=4, classes=2)
MLP = dict(inputs=1024, width=4096, layers=2, classes=10)
MLP_SMALL = dict(MLP, width=1024)


def bert(**sizes):
    """The encoder with BERT's sizes, any of them replaced."""
    return models.encoder(tf.keras, **dict(BERT, **sizes))


def build(name):
    return bert() if name == "bert" else models.mlp(tf.keras, **(MLP_SMALL if name == "mlp-small" else MLP))


def synthetic_data(name, examples, seed=0):
    """(inputs, labels) NumPy arrays of `examples` random examples."""
    if name == "bert":
        return models.random_sequences(examples, BERT["vocab"], BERT["seq"], BERT["classes"], seed=seed)
    return models.random_features(examples, MLP["inputs"], MLP["classes"], seed=seed)
