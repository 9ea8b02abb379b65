"""Keras 3 training on scikit-learn's digits with the Horovod-style API: DistributedOptimizer and callbacks.

    bpslaunch --local --workers 2 --servers 1 -- python examples/keras_digits.py
"""

import hashlib

import keras
import numpy as np
from sklearn import datasets

import bps_tf as bps
import bps_tf.keras as bps_keras


def load(rank, size):
    """scikit-learn's handwritten digits (shipped with it, no download): this worker's share of a fixed 80%
    training split, and the whole test split; pixels scaled to [0, 1]."""
    digits = datasets.load_digits()
    order = np.random.default_rng(0).permutation(len(digits.target))
    x, y = (digits.data[order] / 16.0).astype(np.float32), digits.target[order].astype(np.int64)
    split = int(0.8 * len(x))
    return x[:split][rank::size], y[:split][rank::size], x[split:], y[split:]


def fingerprint(weights):
    """A short hash of the weights: the same on every worker that holds the same model."""
    return hashlib.sha256(b"".join(np.ascontiguousarray(w).tobytes() for w in weights)).hexdigest()[:16]


def main():
    bps.init()
    rank, size = bps.rank(), bps.size()
    x_train, y_train, x_test, y_test = load(rank, size)

    model = keras.Sequential([
        keras.Input((64,)),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10, activation="softmax"),
    ])
    # Scale the learning rate with the number of workers; the warmup callback ramps up to it.
    learning_rate = 0.01 * size
    optimizer = bps.DistributedOptimizer(keras.optimizers.Adam(learning_rate))
    model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    callbacks = [
        bps_keras.callbacks.BroadcastGlobalVariablesCallback(0),  # everyone starts from worker 0's weights
        bps_keras.callbacks.MetricAverageCallback(),              # logs show averages over all workers
        bps_keras.callbacks.LearningRateWarmupCallback(initial_lr=learning_rate, warmup_epochs=2),
    ]
    model.fit(x_train, y_train, batch_size=32, epochs=10, callbacks=callbacks, verbose=2 if rank == 0 else 0)
    _, accuracy = model.evaluate(x_test, y_test, verbose=0)
    print(f"worker {rank}: test accuracy {accuracy:.3f}, model fingerprint {fingerprint(model.get_weights())}")
    bps.shutdown()


if __name__ == "__main__":
    main()
