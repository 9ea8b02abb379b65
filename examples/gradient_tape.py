"""A custom training loop with DistributedGradientTape on scikit-learn's digits.

    bpslaunch --local --workers 2 --servers 1 -- python examples/gradient_tape.py
"""

import hashlib

import keras
import numpy as np
import tensorflow as tf
from sklearn import datasets

import bps_tf as bps


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
    dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(1000, seed=rank).batch(32)

    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(10)])
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = keras.optimizers.SGD(0.1 * size, momentum=0.9)
    # Everyone starts from worker 0's weights.
    bps.broadcast_variables(model.variables, root_rank=0)

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        tape = bps.DistributedGradientTape(tape)  # gradients averaged over all workers
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    # Every worker must take the same number of steps: use the smallest shard's count.
    steps = int(bps.push_pull(tf.constant(len(dataset)), name="steps", op=bps.Sum)) // size
    for epoch in range(8):
        losses = [train_step(x, y) for x, y in dataset.take(steps)]
        mean_loss = bps.push_pull(tf.reduce_mean(losses), name="epoch_loss")
        if rank == 0:
            print(f"epoch {epoch + 1}: loss {float(mean_loss):.4f}")
    logits = model(x_test)
    accuracy = float(tf.reduce_mean(tf.cast(tf.argmax(logits, axis=1) == y_test, tf.float32)))
    print(f"worker {rank}: test accuracy {accuracy:.3f}, model fingerprint {fingerprint(model.get_weights())}")
    bps.shutdown()


if __name__ == "__main__":
    main()
