"""The two models of the end-to-end benchmark, built with whichever Keras `tf.keras` is (tf-keras here,
through TF_USE_LEGACY_KERAS=1, since Keras 3 cannot run MultiWorkerMirroredStrategy), and their synthetic data.

bert: a small BERT-like encoder (token + position embeddings, pre-built Keras attention blocks), classifying
      a sequence from its first token; dense gradients dominate (the embedding's are sparse, see docs).
mlp:  a wide multilayer perceptron: large dense layers, little compute per byte of gradient.
mlp-small: the same, 1024 wide (8.4 MB of gradients): a step that 8 workers on 2 cores train quickly.
"""

import numpy as np
import tensorflow as tf

BERT = dict(vocab=8192, seq=128, hidden=256, heads=4, ffn=1024, layers=4, classes=2)
MLP = dict(inputs=1024, hidden=4096, layers=2, classes=10)
MLP_SMALL = dict(MLP, hidden=1024)


def _encoder_block(x, hidden, heads, ffn):
    keras = tf.keras
    attention = keras.layers.MultiHeadAttention(num_heads=heads, key_dim=hidden // heads)(x, x)
    x = keras.layers.LayerNormalization(epsilon=1e-6)(x + attention)
    inner = keras.layers.Dense(ffn, activation="gelu")(x)
    return keras.layers.LayerNormalization(epsilon=1e-6)(x + keras.layers.Dense(hidden)(inner))


class PositionEmbedding(tf.keras.layers.Layer):
    def __init__(self, length, width, **kwargs):
        super().__init__(**kwargs)
        self.table = self.add_weight(name="positions", shape=(length, width), initializer="random_normal")

    def call(self, x):
        return x + self.table


def bert(vocab, seq, hidden, heads, ffn, layers, classes):
    keras = tf.keras
    tokens = keras.Input(shape=(seq,), dtype="int32")
    x = PositionEmbedding(seq, hidden)(keras.layers.Embedding(vocab, hidden)(tokens))
    for _ in range(layers):
        x = _encoder_block(x, hidden, heads, ffn)
    first = keras.layers.Lambda(lambda h: h[:, 0])(x)
    return keras.Model(tokens, keras.layers.Dense(classes)(first))


def mlp(inputs, hidden, layers, classes):
    keras = tf.keras
    features = keras.Input(shape=(inputs,))
    x = features
    for _ in range(layers):
        x = keras.layers.Dense(hidden, activation="relu")(x)
    return keras.Model(features, keras.layers.Dense(classes)(x))


def build(name):
    return bert(**BERT) if name == "bert" else mlp(**(MLP_SMALL if name == "mlp-small" else MLP))


def synthetic_data(name, examples, seed=0):
    """(inputs, labels) NumPy arrays of `examples` random examples."""
    rng = np.random.default_rng(seed)
    if name == "bert":
        x = rng.integers(0, BERT["vocab"], size=(examples, BERT["seq"]), dtype=np.int32)
        return x, rng.integers(0, BERT["classes"], size=examples, dtype=np.int32)
    x = rng.standard_normal((examples, MLP["inputs"]), dtype=np.float32)
    return x, rng.integers(0, MLP["classes"], size=examples, dtype=np.int32)
