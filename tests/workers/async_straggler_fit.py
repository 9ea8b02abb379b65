"""Keras fit under BytePSStrategy in an asynchronous mode (the job's environment) with a straggler: worker
SLOW_RANK's forward pass sleeps SLOW_SECONDS. Every worker prints the wall-clock time at which each of its
steps ended (the workers share one machine's clock), so that the test can count the straggler's steps taken
by the time the others were done.
"""

import json
import os
import time

import tensorflow as tf

import bps_tf
from bps_tf import BytePSStrategy
from testing.digits import load

SLOW_RANK = int(os.environ.get("SLOW_RANK", "2"))
SLOW_SECONDS = float(os.environ.get("SLOW_SECONDS", "0.2"))
EPOCHS = 3


class SlowCompute(tf.keras.layers.Layer):
    """The identity, after a sleep on the straggler."""

    def call(self, x):
        if bps_tf.rank() != SLOW_RANK:
            return x

        def sleep_then_pass(value):
            time.sleep(SLOW_SECONDS)
            return value

        return tf.ensure_shape(tf.numpy_function(sleep_then_pass, [x], x.dtype, stateful=True), x.shape)


class StepEnds(tf.keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.ends = []

    def on_train_batch_end(self, batch, logs=None):
        self.ends.append(time.time())


def main():
    strategy = BytePSStrategy()
    x_train, y_train, _, _ = load(rank=0, size=1)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((64,)), SlowCompute(), tf.keras.layers.Dense(32, activation="relu"),
                                     tf.keras.layers.Dense(10, activation="softmax")])
        model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy",
                      metrics=["accuracy"], jit_compile=False)
    steps = StepEnds()
    model.fit(x_train[:960], y_train[:960], batch_size=96, epochs=EPOCHS, verbose=0, callbacks=[steps])
    print(f"rank {bps_tf.rank()}: steps {json.dumps(steps.ends)}", flush=True)


if __name__ == "__main__":
    main()
