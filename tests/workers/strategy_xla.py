"""BytePSStrategy under XLA, on N workers x D logical CPU devices: Keras fit with jit_compile=True, a
strategy.run loop whose replica function is compiled with XLA and one whose whole step is, mixed precision,
sparse gradients and the Horovod API's DistributedOptimizer, each ending with the weights of single-process XLA
training; gradients compressed to float16 pushing half the bytes; jit_compile="auto"; the push_pulls ran
inside the compiled computations (XLA_FLAGS dumps them to $XLA_DUMP_DIR, where their custom calls are looked
for); and what XLA cannot do is refused with a clear message."""

import glob
import os

import numpy as np
import tensorflow as tf

from testing.worker_setup import devices_from_argv_and_keras, tolerance  # noqa: E402

RTOL, ATOL = tolerance()
LOCAL_DEVICES, keras = devices_from_argv_and_keras()

import bps_tf  # noqa: E402
import bps_tf.numpy  # noqa: E402
from bps_tf.strategy import BytePSStrategy  # noqa: E402
from testing.agreement import assert_identical_everywhere  # noqa: E402

STEPS, GLOBAL_BATCH, FEATURES = 6, 24, 5


def make_model(vocabulary=None):
    keras.utils.set_random_seed(11)
    if vocabulary:
        return keras.Sequential([keras.Input((3,), dtype="int32"), keras.layers.Embedding(vocabulary, 4),
                                 keras.layers.Flatten(), keras.layers.Dense(1)])
    return keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(7, activation="tanh"),
                             keras.layers.Dense(1)])


def data(vocabulary=None):
    rng = np.random.default_rng(5)
    if vocabulary:
        x = rng.integers(0, vocabulary, (STEPS * GLOBAL_BATCH, 3)).astype(np.int32)
        return x, (x.sum(axis=1, keepdims=True) % 3).astype(np.float32)
    x = rng.standard_normal((STEPS * GLOBAL_BATCH, FEATURES)).astype(np.float32)
    return x, np.cos(x.sum(axis=1, keepdims=True)).astype(np.float32)


def fitted(strategy=None, vocabulary=None, optimizer=lambda: keras.optimizers.SGD(0.1)):
    """Weights after one epoch of fit with jit_compile=True, under `strategy` or on this process alone."""
    x, y = data(vocabulary)
    with strategy.scope() if strategy else _nothing():
        model = make_model(vocabulary)
        model.compile(optimizer=optimizer(), loss="mse", jit_compile=True)
    model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=1, shuffle=False, verbose=0)
    return model.get_weights()


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def assert_close(got, want, label):
    for index, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=f"{label}: variable {index}")
    assert_identical_everywhere(got, label)


def check_fit(strategy):
    assert_close(fitted(strategy), fitted(), "fit")
    adam = lambda: keras.optimizers.Adam(0.01)  # noqa: E731
    assert_close(fitted(strategy, optimizer=adam), fitted(optimizer=adam), "fit-adam")
    # An embedding's gradient is sparse: reduced dense inside XLA.
    assert_close(fitted(strategy, vocabulary=10), fitted(vocabulary=10), "fit-sparse")


def loop_weights(strategy, compile_whole_step):
    x, y = data()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH)
    with strategy.scope():
        model = make_model()
        optimizer = keras.optimizers.SGD(0.1)
    distributed = strategy.experimental_distribute_dataset(dataset)

    def replica_step(batch_x, batch_y):
        with tf.GradientTape() as tape:
            per_example = tf.square(model(batch_x) - batch_y)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    if compile_whole_step:
        @tf.function(jit_compile=True)
        def train_step(batch_x, batch_y):
            losses = strategy.run(replica_step, args=(batch_x, batch_y))
            return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)
    else:
        compiled = tf.function(replica_step, jit_compile=True)

        @tf.function
        def train_step(batch_x, batch_y):
            losses = strategy.run(compiled, args=(batch_x, batch_y))
            return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    for inputs in distributed:
        train_step(*inputs)
    return model.get_weights()


def check_custom_loops(strategy):
    reference = fitted()
    assert_close(loop_weights(strategy, compile_whole_step=False), reference, "loop-replica-compiled")
    assert_close(loop_weights(strategy, compile_whole_step=True), reference, "loop-step-compiled")


def my_rows():
    """The rows of data() this worker trains on with the Horovod API: its consecutive share of each global
    batch, and the share's size."""
    rank, per_worker = bps_tf.rank(), GLOBAL_BATCH // bps_tf.size()
    rows = [np.arange(step * GLOBAL_BATCH + rank * per_worker, step * GLOBAL_BATCH + (rank + 1) * per_worker)
            for step in range(STEPS)]
    return np.concatenate(rows), per_worker


def check_horovod_api():
    """DistributedOptimizer in a plain Keras model compiled with XLA: the gradients' push_pulls inside it."""
    import bps_tf.keras as hvd

    x, y = data()
    mine, per_worker = my_rows()
    model = make_model()
    model.compile(optimizer=hvd.DistributedOptimizer(keras.optimizers.SGD(0.1)), loss="mse", jit_compile=True)
    model.fit(x[mine], y[mine], batch_size=per_worker, epochs=1, shuffle=False, verbose=0)
    assert_close(model.get_weights(), fitted(), "horovod-api")


def check_mixed_precision(strategy):
    x, y = data()
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        with strategy.scope():
            model = make_model()
            model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", jit_compile=True)
        history = model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=3, shuffle=False, verbose=0)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    losses = history.history["loss"]
    assert losses[-1] < losses[0], losses
    assert_identical_everywhere(model.get_weights(), "mixed-xla")


def _wide_model():
    keras.utils.set_random_seed(11)
    return keras.Sequential([keras.Input((FEATURES,)), keras.layers.Dense(64, activation="tanh"),
                             keras.layers.Dense(1)])


def _bytes_pushed_by_fit(model, x, y, batch, epochs):
    """Bytes this worker pushed during `epochs` epochs of fit, after one that compiles."""
    model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0)
    before = bps_tf.numpy.communication_counters()["bytes_pushed"]
    history = model.fit(x, y, batch_size=batch, epochs=epochs, shuffle=False, verbose=0)
    pushed = bps_tf.numpy.communication_counters()["bytes_pushed"] - before
    assert history.history["loss"][-1] < history.history["loss"][0], history.history
    return pushed


def check_fp16_compression():
    """Compression.fp16 under XLA, with BytePSStrategy and with the Horovod API's DistributedOptimizer: each
    float32 gradient element travels in 2 bytes instead of 4 (nothing else changes), and training goes on
    alike on every worker."""
    import bps_tf.keras as hvd

    x, y = data()
    mine, per_worker = my_rows()
    epochs = 2

    def under_the_strategy(compression):
        with BytePSStrategy(compression=compression).scope():
            model = _wide_model()
            model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", jit_compile=True)
        return model, _bytes_pushed_by_fit(model, x, y, GLOBAL_BATCH, epochs)

    def with_the_horovod_api(compression):
        model = _wide_model()
        optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(0.1), compression=compression)
        model.compile(optimizer=optimizer, loss="mse", jit_compile=True)
        return model, _bytes_pushed_by_fit(model, x[mine], y[mine], per_worker, epochs)

    for label, fit in (("strategy", under_the_strategy), ("horovod-api", with_the_horovod_api)):
        _, uncompressed = fit(bps_tf.Compression.none)
        model, halved = fit(bps_tf.Compression.fp16)
        elements = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
        assert uncompressed - halved == 2 * elements * STEPS * epochs, (label, uncompressed, halved, elements)
        assert_identical_everywhere(model.get_weights(), f"{label}-fp16-xla")


def check_gather_is_refused(strategy):
    @tf.function(jit_compile=True)
    def gather(values):
        return strategy.gather(values, axis=0)

    values = strategy.experimental_distribute_values_from_function(lambda context: tf.ones([1]))
    try:
        gather(values)
    except ValueError as error:
        assert "jit_compile=False" in str(error), error
        return
    raise AssertionError("all_gather inside XLA was not refused")


def check_auto_compiles_where_one_device_would(strategy):
    """Keras 3's default, jit_compile="auto": XLA on a GPU (one per process), not on CPUs, as without a
    strategy (Keras itself turns XLA off under any tf.distribute strategy)."""
    if str(getattr(keras, "__version__", "2")).startswith("2"):
        return  # Keras 2 has no "auto"
    with strategy.scope():
        model = make_model()
        model.compile(optimizer="sgd", loss="mse")
    on_gpu = "GPU" in strategy.extended.worker_devices[0].upper()
    assert model.jit_compile == on_gpu, (model.jit_compile, strategy.extended.worker_devices)


def check_push_pulls_were_compiled():
    # bytes: the workers share the dump's folder, and one may be writing a file (cut mid-character) as the
    # other reads it
    paths = glob.glob(os.path.join(os.environ["XLA_DUMP_DIR"], "*.txt"))
    dumped = b"".join(open(path, "rb").read() for path in paths)
    assert b"bps_tf_push_pull_start" in dumped and b"bps_tf_push_pull_done" in dumped, "no push_pull in XLA's HLO"


def main():
    strategy = BytePSStrategy()
    assert strategy.num_replicas_in_sync == LOCAL_DEVICES * bps_tf.size()
    check_fit(strategy)
    check_custom_loops(strategy)
    check_horovod_api()
    check_mixed_precision(strategy)
    check_fp16_compression()
    check_gather_is_refused(strategy)
    check_auto_compiles_where_one_device_would(strategy)
    check_push_pulls_were_compiled()
    print(f"rank {bps_tf.rank()}: XLA under the strategy equals single-process XLA training", flush=True)
    bps_tf.shutdown()


if __name__ == "__main__":
    main()
