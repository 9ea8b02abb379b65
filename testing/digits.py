"""The digits task of the tests and benchmarks: scikit-learn's handwritten digits (shipped with scikit-learn,
no download), split into a fixed train and test set, each worker training on its own shard; and a fingerprint
of a model's weights, to check that the workers hold the same model."""

import hashlib

import numpy as np


def load(rank, size):
    """(x_train shard, y_train shard, x_test, y_test); pixels scaled to [0, 1]. scikit-learn is imported only
    here, when the data is wanted."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    split = int(0.8 * len(x))
    x_train, y_train = x[:split], y[:split]
    return x_train[rank::size], y_train[rank::size], x[split:], y[split:]


def training_loss(probabilities_of):
    """The mean cross-entropy over the whole training set (every shard) of a model given as a function from
    images to class probabilities: what training minimises, a finer measure of it than the test accuracy."""
    x_train, y_train, _, _ = load(0, 1)
    probabilities = np.asarray(probabilities_of(x_train), dtype=np.float64)
    return float(-np.mean(np.log(np.maximum(probabilities[np.arange(len(y_train)), y_train], 1e-12))))


def fingerprint(arrays):
    """A short hash of the model's weights: equal on every worker when they hold the same model."""
    digest = hashlib.sha256()
    for array in arrays:
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()[:16]
