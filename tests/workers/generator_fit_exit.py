"""Keras fit under BytePSStrategy from a Python generator (a pipeline still running when fit returns, as
with a PyDataset or a data loader), then the process ends at once: it must exit, not hang deleting that
pipeline while the interpreter takes its modules apart."""

import itertools
import time

import numpy as np

import bps_tf
from bps_tf import BytePSStrategy


def batches():
    rng = np.random.default_rng(bps_tf.rank())
    for _ in itertools.count():
        x = rng.standard_normal((16, 4)).astype(np.float32)
        time.sleep(0.02)  # a slow source: the pipeline's thread is mostly inside this generator
        yield x, x.sum(axis=1, keepdims=True)


def main():
    import keras

    strategy = BytePSStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
    history = model.fit(batches(), steps_per_epoch=50, epochs=3, verbose=0)
    assert len(history.history["loss"]) == 3, history.history
    print(f"rank {bps_tf.rank()}: generator fit done", flush=True)


if __name__ == "__main__":
    main()
