"""Keras fit with BytePSStrategy on scikit-learn's digits: the model, the optimizer and fit are plain Keras;
the strategy makes it data-parallel across every worker of the job. `make demo` runs this.

    bpslaunch --local --workers 2 --servers 1 -- python examples/keras_strategy.py
"""

import keras
import numpy as np
from sklearn import datasets

import bps_tf
from bps_tf.strategy import BytePSStrategy


def load(rank, size):
    """scikit-learn's handwritten digits (shipped with it, no download): this worker's share of a fixed 80%
    training split, and the whole test split; pixels scaled to [0, 1]."""
    digits = datasets.load_digits()
    order = np.random.default_rng(0).permutation(len(digits.target))
    x, y = (digits.data[order] / 16.0).astype(np.float32), digits.target[order].astype(np.int64)
    split = int(0.8 * len(x))
    return x[:split][rank::size], y[:split][rank::size], x[split:], y[split:]


def main():
    strategy = BytePSStrategy()  # joins the job; num_replicas_in_sync counts every worker's devices
    rank = bps_tf.rank()
    # Every worker passes the whole training set: the strategy gives each worker its own shard.
    x_train, y_train, x_test, y_test = load(rank=0, size=1)
    if rank == 0:
        print(f"{bps_tf.size()} workers, {strategy.num_replicas_in_sync} replicas in sync")

    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([
            keras.Input((64,)),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dropout(0.1),
            keras.layers.Dense(10, activation="softmax"),
        ])
        model.compile(optimizer=keras.optimizers.Adam(0.003), loss="sparse_categorical_crossentropy",
                      metrics=["accuracy"])
    # The batch size is global; logs are averaged over all workers.
    model.fit(x_train, y_train, batch_size=64, epochs=12, validation_split=0.1, verbose=1 if rank == 0 else 0)
    loss, accuracy = model.evaluate(x_test, y_test, verbose=0)
    print(f"worker {rank}: test loss {loss:.4f}, test accuracy {accuracy:.3f}")
    bps_tf.shutdown()


if __name__ == "__main__":
    main()
