"""Data-parallel training equals single-process training on the concatenated batches:
DistributedGradientTape in a tf.function loop, and DistributedOptimizer with backward_passes_per_step=2
(Keras 3 and tf-keras), each against a reference computed here without communication."""

import numpy as np
import tensorflow as tf

import bps_tf as bps

STEPS, PER_WORKER, FEATURES = 8, 16, 6


def make_model(keras):
    keras.utils.set_random_seed(7)  # the same start everywhere, and for the reference
    return keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(8, activation="tanh"),
                             keras.layers.Dense(1)])


def global_batches(size):
    rng = np.random.default_rng(3)
    for _ in range(STEPS):
        x = rng.standard_normal((PER_WORKER * size, FEATURES)).astype(np.float32)
        yield x, np.sin(x.sum(axis=1, keepdims=True)).astype(np.float32)


def loss_fn(model, x, y):
    return tf.reduce_mean(tf.square(model(x) - y))


def check_tape(keras, rank, size):
    model, reference = make_model(keras), make_model(keras)
    optimizer, reference_optimizer = keras.optimizers.SGD(0.1), keras.optimizers.SGD(0.1)

    @tf.function
    def distributed_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(model, x, y)
        tape = bps.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    for x, y in global_batches(size):
        shard = slice(rank * PER_WORKER, (rank + 1) * PER_WORKER)
        distributed_step(x[shard], y[shard])
        with tf.GradientTape() as tape:
            loss = loss_fn(reference, x, y)
        reference_optimizer.apply_gradients(zip(tape.gradient(loss, reference.trainable_variables),
                                                reference.trainable_variables))
    for got, want in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def check_backward_passes(keras, rank, size, average):
    """Two micro-batches per update: the update uses the sum (Horovod's default) or, with
    average_aggregated_gradients, the mean of both global micro-batches' gradients."""
    model, reference = make_model(keras), make_model(keras)
    optimizer = bps.DistributedOptimizer(keras.optimizers.SGD(0.1), backward_passes_per_step=2,
                                         average_aggregated_gradients=average)
    reference_optimizer = keras.optimizers.SGD(0.1)
    pending = []
    for x, y in global_batches(size):
        shard = slice(rank * PER_WORKER, (rank + 1) * PER_WORKER)
        with tf.GradientTape() as tape:
            loss = loss_fn(model, x[shard], y[shard])
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        with tf.GradientTape() as tape:
            loss = loss_fn(reference, x, y)
        pending.append(tape.gradient(loss, reference.trainable_variables))
        if len(pending) == 2:
            combined = [(a + b) / 2 if average else a + b for a, b in zip(*pending)]
            reference_optimizer.apply_gradients(zip(combined, reference.trainable_variables))
            pending = []
    for got, want in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def main():
    import keras
    import tf_keras

    bps.init()
    rank, size = bps.rank(), bps.size()
    for module in (keras, tf_keras):
        check_tape(module, rank, size)
        for average in (False, True):
            check_backward_passes(module, rank, size, average)
    print(f"rank {rank}: equals single-process training", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
