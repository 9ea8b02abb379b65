"""BytePSStrategy on N workers x D logical CPU devices ends with the same weights as single-process,
single-device training with the same global batch and data order: Keras fit, and a strategy.run loop.

WIDTH=<units> (default 7): the hidden layer's width (420000 makes its kernel's gradient 8 MB, which a server
on the host sums in place). Each worker reports whether any of its pushes went in place."""

import contextlib
import os

import numpy as np
import tensorflow as tf

from testing.worker_setup import devices_from_argv_and_keras, tolerance  # noqa: E402

RTOL, ATOL = tolerance()

LOCAL_DEVICES, keras = devices_from_argv_and_keras()

import bps_tf  # noqa: E402
import bps_tf.numpy  # noqa: E402
from bps_tf.strategy import BytePSStrategy  # noqa: E402

STEPS, GLOBAL_BATCH, FEATURES = 6, 24, 5
WIDTH = int(os.environ.get("WIDTH", 7))


def make_model():
    keras.utils.set_random_seed(11)
    return keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(WIDTH, activation="tanh"),
                             keras.layers.Dense(1)])


def data():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((STEPS * GLOBAL_BATCH, FEATURES)).astype(np.float32)
    return x, np.cos(x.sum(axis=1, keepdims=True)).astype(np.float32)


def fitted_weights(strategy=None):
    """Weights after one epoch of Keras fit under `strategy`, or on one process and one device with the full
    global batch each step."""
    x, y = data()
    with strategy.scope() if strategy else contextlib.nullcontext():
        model = make_model()
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=1, shuffle=False, verbose=0)
    return model.get_weights()


def check_fit(strategy, reference):
    for got, want in zip(fitted_weights(strategy), reference):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def check_mixed_precision_fit(strategy):
    """mixed_float16 (a LossScaleOptimizer; the gradients reduced before its finiteness check) ends where
    one process does, to float16's precision: a gradient summed twice, or not at all, is far outside it."""
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        reference, got = fitted_weights(), fitted_weights(strategy)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    for g, want in zip(got, reference):
        np.testing.assert_allclose(g, want, rtol=1e-2, atol=2e-3)


def check_custom_loop(strategy, reference):
    x, y = data()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH)
    with strategy.scope():
        model = make_model()
        optimizer = keras.optimizers.SGD(0.1)
    distributed = strategy.experimental_distribute_dataset(dataset)

    @tf.function
    def train_step(inputs):
        def step(batch_x, batch_y):
            with tf.GradientTape() as tape:
                per_example = tf.square(model(batch_x) - batch_y)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss
        losses = strategy.run(step, args=inputs)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    for inputs in distributed:
        train_step(inputs)
    for got, want in zip(model.get_weights(), reference):
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def main():
    strategy = BytePSStrategy()
    rank, size = bps_tf.rank(), bps_tf.size()
    assert strategy.num_replicas_in_sync == LOCAL_DEVICES * size, strategy.num_replicas_in_sync
    reference = fitted_weights()
    check_fit(strategy, reference)
    check_custom_loop(strategy, reference)
    check_mixed_precision_fit(strategy)
    print(f"rank {rank}: strategy equals single-process training", flush=True)
    in_place = bps_tf.numpy.communication_counters()["bytes_pushed_in_place"]
    print(f"rank {rank}: pushed in place {'yes' if in_place > 0 else 'no'}", flush=True)
    bps_tf.shutdown()


if __name__ == "__main__":
    main()
