"""The Keras models the tests and benchmarks train, built with the Keras module given (Keras 3, or tf-keras
as `tf.keras` under TF_USE_LEGACY_KERAS=1), and their random data.

encoder: a BERT-like encoder (token and position embeddings, attention blocks) classifying a sequence from
         its first token; dense gradients dominate (the embedding's are sparse when the strategy asks).
mlp:     a multilayer perceptron: large dense layers, little compute per byte of gradient.
resnet50: Keras's ResNet-50, untrained.
The classifying layer computes in float32 under a mixed-precision policy, as Keras's guide advises."""

import numpy as np

# BERT-base's sizes.
BERT_BASE = dict(vocab=30522, seq=128, hidden=768, heads=12, ffn=3072, layers=12, classes=2)


def encoder(keras, vocab, seq, hidden, heads, ffn, layers, classes=2):
    """Token embeddings plus learned positions, `layers` blocks of attention and a feed-forward layer of
    width `ffn` (each with a residual and layer normalisation), then a classifier of the first position."""

    class Positions(keras.layers.Layer):
        def build(self, shape):
            self.table = self.add_weight(shape=(shape[1], shape[2]), initializer="random_normal", name="positions")

        def call(self, x):
            return x + self.table

    tokens = keras.Input((seq,), dtype="int32")
    x = Positions()(keras.layers.Embedding(vocab, hidden)(tokens))
    for _ in range(layers):
        attention = keras.layers.MultiHeadAttention(heads, hidden // heads)(x, x)
        x = keras.layers.LayerNormalization(epsilon=1e-12)(x + attention)
        inner = keras.layers.Dense(ffn, activation="gelu")(x)
        x = keras.layers.LayerNormalization(epsilon=1e-12)(x + keras.layers.Dense(hidden)(inner))
    return keras.Model(tokens, keras.layers.Dense(classes, dtype="float32")(x[:, 0]))


def mlp(keras, inputs, width, layers, classes):
    """inputs -> `layers` x Dense(width, relu) -> classes."""
    features = keras.Input((inputs,))
    x = features
    for _ in range(layers):
        x = keras.layers.Dense(width, activation="relu")(x)
    return keras.Model(features, keras.layers.Dense(classes, dtype="float32")(x))


def resnet50(keras, image_size):
    return keras.applications.ResNet50(weights=None, input_shape=(image_size, image_size, 3), classes=1000)


def random_images(examples, image_size, classes=1000, seed=0):
    """(images, labels) of `examples` random examples."""
    rng = np.random.default_rng(seed)
    return rng.random((examples, image_size, image_size, 3), dtype=np.float32), rng.integers(0, classes, examples)


def random_sequences(examples, vocab, seq, classes=2, seed=0):
    """(tokens, labels) of `examples` random sequences."""
    rng = np.random.default_rng(seed)
    return (rng.integers(0, vocab, (examples, seq), dtype=np.int32),
            rng.integers(0, classes, examples, dtype=np.int32))


def random_features(examples, inputs, classes, seed=0):
    """(features, labels) of `examples` random examples."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((examples, inputs), dtype=np.float32),
            rng.integers(0, classes, examples, dtype=np.int32))
