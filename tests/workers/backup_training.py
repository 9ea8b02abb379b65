"""Training on scikit-learn's digits with backup workers (argv[1]: "strategy", Keras fit under BytePSStrategy;
"horovod", Keras fit with DistributedOptimizer; "tape", a loop with DistributedGradientTape), worker
SLOW_RANK's forward pass sleeping SLOW_SECONDS (its compute is slow: a step it skips to catch up does not
sleep). Prints the test accuracy (the test compares it with a synchronous run; metrics are reduced over every
worker), this worker's late pushes, the steps it skipped and the median time of its steps; every worker must
end with bit-identical weights."""

import os
import statistics
import sys
import time

import numpy as np
import tensorflow as tf

import bps_tf as bps
import bps_tf.keras
import bps_tf.numpy as bps_numpy
from bps_tf.strategy import BytePSStrategy, stragglers
from testing.agreement import assert_identical_everywhere
from testing.digits import load

SLOW_RANK = int(os.environ.get("SLOW_RANK", "1"))
SLOW_SECONDS = float(os.environ.get("SLOW_SECONDS", "0"))
EPOCHS = 15


class SlowCompute(tf.keras.layers.Layer):
    """The identity, after a sleep on the straggler."""

    def call(self, x):
        if bps.rank() != SLOW_RANK or SLOW_SECONDS == 0:
            return x

        def sleep_then_pass(value):
            time.sleep(SLOW_SECONDS)
            return value

        slept = tf.numpy_function(sleep_then_pass, [x], x.dtype, stateful=True)
        return tf.ensure_shape(slept, x.shape)


class StepTimes(tf.keras.callbacks.Callback):
    """Each training step's wall time, begin to end."""

    def __init__(self):
        super().__init__()
        self.seconds = []

    def on_train_batch_begin(self, batch, logs=None):
        self._began = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self.seconds.append(time.perf_counter() - self._began)


def model():
    tf.keras.utils.set_random_seed(0)
    return tf.keras.Sequential([tf.keras.Input((64,)), SlowCompute(), tf.keras.layers.Dense(128, activation="relu"),
                                tf.keras.layers.Dense(10, activation="softmax")])


def strategy_fit(step_times):
    strategy = BytePSStrategy()
    x_train, y_train, x_test, y_test = load(rank=0, size=1)  # the strategy gives each worker its shard
    with strategy.scope():
        net = model()
        net.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy",
                    metrics=["accuracy"], jit_compile=False)
    net.fit(x_train, y_train, batch_size=64, epochs=EPOCHS, verbose=0, callbacks=[step_times])
    _, accuracy = net.evaluate(x_test, y_test, verbose=0)
    return net, accuracy


def horovod_fit(step_times):
    x_train, y_train, x_test, y_test = load(bps.rank(), bps.size())
    net = model()
    net.compile(optimizer=bps.DistributedOptimizer(tf.keras.optimizers.SGD(0.1)),
                loss="sparse_categorical_crossentropy", metrics=["accuracy"], jit_compile=False)
    callbacks = [bps.keras.callbacks.BroadcastGlobalVariablesCallback(0), step_times]
    net.fit(x_train, y_train, batch_size=64 // bps.size(), epochs=EPOCHS, verbose=0, callbacks=callbacks,
            shuffle=False)
    _, accuracy = net.evaluate(x_test, y_test, verbose=0)
    return net, accuracy


def horovod_tape(step_times):
    """A training loop as Horovod's TensorFlow 2 examples write it: DistributedGradientTape, plain optimizer,
    the variables broadcast after the first step."""
    x_train, y_train, x_test, y_test = load(bps.rank(), bps.size())
    net = model()
    optimizer = tf.keras.optimizers.SGD(0.1)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy()
    batches = tf.data.Dataset.from_tensor_slices((x_train, y_train)).batch(64 // bps.size())

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, net(x, training=True))
        tape = bps.DistributedGradientTape(tape)
        gradients = tape.gradient(loss, net.trainable_variables)
        optimizer.apply_gradients(zip(gradients, net.trainable_variables))

    for epoch in range(EPOCHS):
        for x, y in batches:
            step_times.on_train_batch_begin(None)
            train_step(x, y)
            if optimizer.iterations.numpy() == 1:
                bps.broadcast_variables(net.variables + optimizer.variables, root_rank=0)
            step_times.on_train_batch_end(None)
    predictions = np.argmax(net(x_test, training=False).numpy(), axis=1)
    return net, float(np.mean(predictions == y_test))


def main():
    bps.init()
    rank = bps.rank()
    before = bps_numpy.communication_counters()["late_pushes"]
    step_times = StepTimes()
    trainings = {"strategy": strategy_fit, "horovod": horovod_fit, "tape": horovod_tape}
    net, accuracy = trainings[sys.argv[1]](step_times)
    late = bps_numpy.communication_counters()["late_pushes"] - before
    assert_identical_everywhere(net.get_weights(), "weights")
    print(f"rank {rank}: test accuracy {accuracy:.4f}, {late} late pushes, {stragglers.steps_caught_up()} steps "
          f"skipped, median step {1000 * statistics.median(step_times.seconds):.2f} ms, weights identical",
          flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
