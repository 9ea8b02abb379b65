"""Keras fit, evaluate and predict under BytePSStrategy with a global batch that does not split evenly over
the workers (32 over 3: 11, 11, 10), from numpy arrays, a finite tf.data pipeline (a partial last batch) and
a repeated one, each also compiled with XLA (jit_compile=True); before them, reductions of tensors whose
shapes differ between workers (strategy.reduce, the Horovod API's allreduce), which must fail at once. Each
worker writes what it got to OUT/rank<R>.npz (the compiled runs' under "xla/"); worker 0 then trains the same
models in a single process under MirroredStrategy with one replica per worker (the same split of every
batch), without XLA (MirroredStrategy with several devices cannot compile it), and writes
OUT/reference.npz. The test compares the files.

argv: OUT
"""

import sys
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

from testing.worker_setup import split_cpu

OUT = Path(sys.argv[1])
WORKERS = 3
split_cpu(WORKERS)  # this process's CPU as 3 devices: BytePSStrategy uses one, the reference all three
keras = tf.keras

import bps_tf  # noqa: E402
import bps_tf.numpy as bps_numpy  # noqa: E402
import bps_tf.keras as hvd_keras  # noqa: E402
import bps_tf.tensorflow as hvd  # noqa: E402
from bps_tf.strategy import BytePSStrategy  # noqa: E402
from testing.digits import load  # noqa: E402

GLOBAL_BATCH = 32


def digits():
    x, y, _, _ = load(0, 1)  # every worker holds all of it; the strategy gives each its share of each batch
    return x, y


def model_in(strategy, jit_compile):
    with strategy.scope():
        keras.utils.set_random_seed(7)
        model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation="relu"),
                                  keras.layers.Dense(10)])
        model.compile(optimizer=keras.optimizers.SGD(0.1),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"],
                      jit_compile=jit_compile)
    return model


def finite(x, y=None):
    return tf.data.Dataset.from_tensor_slices(x if y is None else (x, y)).batch(GLOBAL_BATCH)


def repeated(x, y):
    keras.utils.set_random_seed(3)
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().shuffle(2000, seed=5).batch(GLOBAL_BATCH)


def run_cases(strategy, jit_compile=False):
    """Every case's weights after fit, evaluate's [loss, accuracy] and predict's outputs, by name."""
    x, y = digits()
    results = {}
    model = model_in(strategy, jit_compile)
    model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=2, shuffle=False, verbose=0)
    results.update(_weights("numpy", model))
    results["numpy/evaluate"] = np.array(model.evaluate(x, y, batch_size=GLOBAL_BATCH, verbose=0))
    results["numpy/predict"] = model.predict(x, batch_size=GLOBAL_BATCH, verbose=0)

    model = model_in(strategy, jit_compile)
    model.fit(finite(x, y), epochs=2, verbose=0)
    results.update(_weights("finite", model))
    results["finite/evaluate"] = np.array(model.evaluate(finite(x, y), verbose=0))
    results["finite/predict"] = model.predict(finite(x), verbose=0)

    model = model_in(strategy, jit_compile)
    model.fit(repeated(x, y), epochs=2, steps_per_epoch=10, verbose=0)
    results.update(_weights("repeated", model))
    return results


def _weights(case, model):
    return {f"{case}/weight{i}": w for i, w in enumerate(model.get_weights())}


def reference_strategy():
    """MirroredStrategy over this process's 3 CPU devices. Keras 3 builds a model from the mean of the
    replicas' first batches, which fails when their sizes differ: here it builds from the first replica's
    (only the shapes matter)."""
    strategy = tf.distribute.MirroredStrategy([d.name for d in tf.config.list_logical_devices("CPU")])
    if not hasattr(keras.Model, "_maybe_symbolic_build"):
        return strategy  # tf-keras builds models differently
    original = keras.Model._maybe_symbolic_build

    def from_first_replica(self, iterator=None, data_batch=None):
        if iterator is not None:
            for _, _, batches in iterator:
                data_batch = tf.nest.map_structure(lambda v: strategy.experimental_local_results(v)[0],
                                                   next(batches))
                break
        return original(self, data_batch=data_batch)

    keras.Model._maybe_symbolic_build = from_first_replica
    return strategy


def time_the_failure(reduce, what):
    """(seconds, error text) of `reduce`, which must fail within a second of every worker calling it."""
    bps_numpy.barrier()  # the clock measures the error, not other workers arriving later
    started = time.monotonic()
    try:
        reduce()
    except (ValueError, tf.errors.InvalidArgumentError) as error:
        elapsed, text = time.monotonic() - started, str(error)
    else:
        raise AssertionError(f"{what} where others have other shapes did not fail")
    assert elapsed < 1.0, f"the error of {what} came after {elapsed:.1f} s"
    return elapsed, text


def check_unequal_reduce_fails_at_once(strategy):
    """A user's strategy.reduce of tensors whose shape differs on one worker (its batch is smaller): a clear
    error at once on every worker, eagerly and in a tf.function; the job goes on."""
    rows = 10 if bps_tf.rank() == WORKERS - 1 else 11
    equal = strategy.reduce(tf.distribute.ReduceOp.SUM, tf.ones([11, 4]), axis=None)  # warms the engine up
    assert float(equal[0, 0]) == WORKERS, equal

    def eagerly():
        return strategy.reduce(tf.distribute.ReduceOp.SUM, tf.ones([rows, 4]), axis=None)

    @tf.function
    def traced():
        return strategy.reduce(tf.distribute.ReduceOp.MEAN, tf.ones([rows, 4]), axis=None)

    traced.get_concrete_function()  # traced before the clock starts
    for how, reduce in (("eagerly", eagerly), ("in a tf.function", traced)):
        elapsed, text = time_the_failure(reduce, f"reducing [{rows}, 4] {how}")
        assert "differ in shape" in text and "10" in text and "11" in text, text
        assert "Batches of different sizes" in text and "axis=0" in text, text
        print(f"rank {bps_tf.rank()}: unequal reduce {how} failed after {elapsed:.2f} s: {text[:400]}", flush=True)
    together = strategy.reduce(tf.distribute.ReduceOp.SUM, tf.ones([rows, 4]), axis=0)  # over the batch axis
    assert float(together[0]) == 32, together
    print(f"rank {bps_tf.rank()}: unequal reduce fails at once", flush=True)


def check_horovod_unequal_allreduce_fails_at_once():
    """The Horovod API's allreduce of per-example values whose shape differs on one worker, eagerly (names
    derived from the call site hold the shape) and in a tf.function: a clear error at once on every worker."""
    rows = 10 if bps_tf.rank() == WORKERS - 1 else 11

    @tf.function
    def traced():
        return hvd.allreduce(tf.ones([rows, 4]))

    traced.get_concrete_function()
    for how, reduce in (("eagerly", lambda: hvd.allreduce(tf.ones([rows, 4]))),
                        ("through bps_tf.keras", lambda: hvd_keras.allreduce(np.ones([rows, 4], np.float32))),
                        ("in a tf.function", traced)):
        elapsed, text = time_the_failure(reduce, f"allreduce of [{rows}, 4] {how}")
        # Eagerly bps_tf checks the shapes; in a tf.function the names agree and the servers compare shapes.
        assert "10" in text and "11" in text and ("differ in shape" in text or "declared it as" in text), text
        assert "Batches of different sizes" in text, text
        print(f"rank {bps_tf.rank()}: unequal allreduce {how} failed after {elapsed:.2f} s: {text[:400]}", flush=True)
    print(f"rank {bps_tf.rank()}: unequal allreduce fails at once", flush=True)


def main():
    strategy = BytePSStrategy(devices=["/device:CPU:0"])
    rank = bps_tf.rank()
    assert bps_tf.size() == WORKERS and strategy.num_replicas_in_sync == WORKERS
    check_unequal_reduce_fails_at_once(strategy)
    check_horovod_unequal_allreduce_fails_at_once()
    results = run_cases(strategy)
    results.update({f"xla/{key}": value for key, value in run_cases(strategy, jit_compile=True).items()})
    np.savez(OUT / f"rank{rank}.npz", **results)
    print(f"rank {rank}: uneven batches trained", flush=True)
    bps_tf.shutdown()
    if rank == 0:
        np.savez(OUT / "reference.npz", **run_cases(reference_strategy()))


if __name__ == "__main__":
    main()
