"""A custom training loop with BytePSStrategy: strategy.run over a distributed dataset, gradients summed
across every replica of every worker, on scikit-learn's digits.

    bpslaunch --local --workers 2 --servers 1 -- python examples/custom_loop.py
"""

import hashlib

import keras
import numpy as np
import tensorflow as tf
from sklearn import datasets

import bps_tf
from bps_tf.strategy import BytePSStrategy

GLOBAL_BATCH = 64


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
    strategy = BytePSStrategy()
    rank = bps_tf.rank()
    x_train, y_train, x_test, y_test = load(rank=0, size=1)
    dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(2000, seed=1).batch(GLOBAL_BATCH)
    distributed = strategy.experimental_distribute_dataset(dataset)  # each worker gets its shard

    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, activation="relu"),
                                  keras.layers.Dense(10)])
        optimizer = keras.optimizers.SGD(0.1, momentum=0.9)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
        accuracy = keras.metrics.SparseCategoricalAccuracy()

    @tf.function
    def train_step(inputs):
        def step(x, y):
            with tf.GradientTape() as tape:
                logits = model(x, training=True)
                loss = tf.nn.compute_average_loss(loss_fn(y, logits), global_batch_size=GLOBAL_BATCH)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))  # summed across all replicas
            accuracy.update_state(y, logits)
            return loss

        losses = strategy.run(step, args=inputs)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    for epoch in range(10):
        accuracy.reset_state()
        total = 0.0
        batches = 0
        for inputs in distributed:
            total += float(train_step(inputs))
            batches += 1
        # Reading a metric is a collective (it sums every worker's counts): every worker reads it.
        epoch_accuracy = float(accuracy.result())
        if rank == 0:
            print(f"epoch {epoch + 1}: loss {total / batches:.4f}, accuracy {epoch_accuracy:.3f}")

    logits = model(x_test)
    test_accuracy = float(tf.reduce_mean(tf.cast(tf.argmax(logits, axis=1) == y_test, tf.float32)))
    print(f"worker {rank}: test accuracy {test_accuracy:.3f}, model fingerprint {fingerprint(model.get_weights())}")
    bps_tf.shutdown()


if __name__ == "__main__":
    main()
