"""Keras fit under BytePSStrategy from a Python generator (a pipeline still running when fit returns, as with
a PyDataset or a data loader): fit twice and evaluate on the same generator, whose pipelines must each stop
reading it before the next starts, then the process ends at once, which must not hang in that pipeline."""

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
    source = batches()
    for _ in range(2):
        history = model.fit(source, steps_per_epoch=10, epochs=2, verbose=0)
        assert len(history.history["loss"]) == 2, history.history
    model.evaluate(source, steps=5, verbose=0)
    print(f"rank {bps_tf.rank()}: generator fits done", flush=True)


if __name__ == "__main__":
    main()
