"""BytePSStrategy features on N workers x 2 logical CPU devices, each against a reference computed here:
global evaluate/predict/metrics, int32 reductions, mixed precision, uneven data, one input iterator per
epoch, its resources deleted off the training thread, and XLA's limit of one device per process."""

import gc
import sys
import threading
import time
import weakref

import numpy as np
import tensorflow as tf

from testing.worker_setup import split_cpu, tolerance  # noqa: E402

split_cpu(2)
RTOL, ATOL = tolerance()

import keras  # noqa: E402

import bps_tf  # noqa: E402
from bps_tf.strategy import BytePSStrategy  # noqa: E402
from testing.agreement import assert_identical_everywhere  # noqa: E402


def data(n=120):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, 6)).astype(np.float32)
    return x, (x[:, :3].sum(axis=1) > 0).astype(np.float32)


def make_model(strategy=None, policy="float32"):
    keras.mixed_precision.set_global_policy(policy)
    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(1, activation="sigmoid", dtype="float32")])
    model.compile(optimizer=keras.optimizers.SGD(0.2), loss="binary_crossentropy", metrics=["accuracy"])
    return model


def in_scope(strategy, **kwargs):
    with strategy.scope():
        return make_model(**kwargs)


def check_evaluate_predict_and_metrics(strategy):
    x, y = data()
    model = in_scope(strategy)
    history = model.fit(x, y, batch_size=24, epochs=3, shuffle=False, verbose=0)
    # Logs are global: identical on every worker.
    assert_identical_everywhere([np.array(history.history["loss"]), np.array(history.history["accuracy"])],
                                "history")
    reference = make_model()
    reference.set_weights(model.get_weights())
    got = model.evaluate(x, y, batch_size=24, verbose=0)
    want = reference.evaluate(x, y, batch_size=24, verbose=0)
    np.testing.assert_allclose(got, want, rtol=RTOL)
    predictions = model.predict(x, batch_size=24, verbose=0)
    assert predictions.shape == (len(x), 1), predictions.shape
    np.testing.assert_allclose(predictions, reference.predict(x, batch_size=24, verbose=0), rtol=RTOL, atol=ATOL)
    # An odd number of samples: the last global batch is partial.
    odd = model.predict(x[:101], batch_size=24, verbose=0)
    np.testing.assert_allclose(odd, reference.predict(x[:101], verbose=0), rtol=RTOL, atol=ATOL)


def check_int32(strategy):
    rank, size = bps_tf.rank(), bps_tf.size()
    values = strategy.experimental_distribute_values_from_function(
        lambda context: tf.constant([context.replica_id_in_sync_group, 1], tf.int32))
    total = strategy.reduce(tf.distribute.ReduceOp.SUM, values, axis=None)
    replicas = strategy.num_replicas_in_sync
    assert total.dtype == tf.int32
    np.testing.assert_array_equal(total.numpy(), [replicas * (replicas - 1) // 2, replicas])

    @tf.function
    def all_reduce_in_replicas():
        def step():
            context = tf.distribute.get_replica_context()
            return context.all_reduce(tf.distribute.ReduceOp.SUM, tf.constant(3, tf.int32))
        return strategy.experimental_local_results(strategy.run(step))

    for value in all_reduce_in_replicas():
        assert int(value) == 3 * replicas, value
    del rank, size


def check_mixed_precision(strategy):
    x, y = data()
    for policy in ("mixed_float16", "mixed_bfloat16"):
        model = in_scope(strategy, policy=policy)
        history = model.fit(x, y, batch_size=24, epochs=4, shuffle=False, verbose=0)
        losses = history.history["loss"]
        assert losses[-1] < losses[0], (policy, losses)
        assert_identical_everywhere(model.get_weights(), f"mixed-{policy}")
    keras.mixed_precision.set_global_policy("float32")


def check_overflow_on_one_worker_skips_everywhere(strategy):
    """Worker 1's second batch overflows float16: every worker skips that step (its push_pulls included) and
    halves the loss scale, then all train on with identical weights."""
    x, y = data(72)
    if bps_tf.rank() == 1:
        x[24, 0] = 1e6  # beyond float16's range: an infinite loss and gradients on this worker only
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    batches = tf.data.Dataset.from_tensor_slices((x, y)).batch(24).with_options(options)
    model = in_scope(strategy, policy="mixed_float16")
    keras.mixed_precision.set_global_policy("float32")
    model.fit(batches.take(1), verbose=0)
    before, scale = model.get_weights(), float(model.optimizer.dynamic_scale.numpy())
    model.fit(batches.skip(1).take(1), verbose=0)
    assert float(model.optimizer.dynamic_scale.numpy()) == scale / 2, (scale, model.optimizer.dynamic_scale)
    for got, want in zip(model.get_weights(), before):
        np.testing.assert_array_equal(got, want)
    model.fit(batches.skip(2), verbose=0)
    assert any(not np.array_equal(g, w) for g, w in zip(model.get_weights(), before)), "the next step was skipped"
    assert_identical_everywhere(model.get_weights(), "after an overflow on one worker")


def check_loss_scale_apply_without_variables(strategy):
    """optimizer.apply(grads) with the variables the optimizer was built with (no trainable_variables)."""
    with strategy.scope():
        variable = keras.Variable(np.zeros(3, np.float32))
        optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(1.0))
        optimizer.build([variable])

    @tf.function
    def step():
        def replica():
            gradient = tf.ones(3) * optimizer.dynamic_scale  # the scaled gradient of a sum
            optimizer.apply([gradient])
        strategy.run(replica)

    step()
    np.testing.assert_allclose(variable.numpy(), -np.full(3, strategy.num_replicas_in_sync, np.float32))
    assert_identical_everywhere([variable.numpy()], "loss-scale apply without variables")


def check_uneven_data(strategy):
    """Worker r has 48 + 24 r samples: every epoch takes as many steps as the smallest worker (2)."""
    rank = bps_tf.rank()
    x, y = data(48 + 24 * rank)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(24).with_options(options)
    model = in_scope(strategy)
    seen = []

    class CountSteps(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(batch)

    model.fit(dataset, epochs=2, verbose=0, callbacks=[CountSteps()])
    assert len(seen) == 4, seen
    assert_identical_everywhere(model.get_weights(), "uneven")


def check_one_iterator_per_epoch(strategy):
    """fit makes one iterator of the distributed dataset per epoch (Keras's spare one at the end of an epoch
    is made only if used), and an iterator that runs on over epochs (steps_per_epoch) still does."""
    from tensorflow.python.distribute import input_lib

    made = []
    local_iter = input_lib.DistributedDataset.__iter__

    def counted(self):
        made.append(self)
        return local_iter(self)

    x, y = data()
    model = in_scope(strategy)
    model.fit(x, y, batch_size=24, epochs=1, shuffle=False, verbose=0)  # builds the model (from one more batch)
    input_lib.DistributedDataset.__iter__ = counted
    try:
        model.fit(x, y, batch_size=24, epochs=3, shuffle=False, verbose=0)
        assert len(made) == 3, f"{len(made)} iterators for 3 epochs"
        made.clear()
        repeated = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(24)
        history = model.fit(repeated, epochs=3, steps_per_epoch=2, verbose=0)
        assert len(made) == 1, f"{len(made)} iterators for 3 epochs of one repeated dataset"
        assert len(history.history["loss"]) == 3, history.history
    finally:
        input_lib.DistributedDataset.__iter__ = local_iter


def check_iterator_resources_deleted_off_the_training_thread(strategy):
    """Deleting an input iterator's resources, which can wait tens of milliseconds for its pipeline's threads,
    happens on bps_tf's deleting threads once the training thread has let go of the iterator: every resource
    an epoch's iterator makes, after each epoch and at the end of fit, and after a collection of the
    reference cycles that hold one."""
    from tensorflow.python.ops import gen_dataset_ops

    made, deleted_on = [], []
    makers = {name: getattr(gen_dataset_ops, name)
              for name in ("anonymous_iterator_v3", "anonymous_multi_device_iterator_v3")}

    def watched(name, make):
        def watched_make(*args, **kwargs):
            handle = make(*args, **kwargs)
            made.append(name)
            weakref.finalize(handle, lambda: deleted_on.append(threading.current_thread().name))
            return handle
        return watched_make

    x, y = data()
    model = in_scope(strategy)
    model.fit(x, y, batch_size=24, epochs=1, shuffle=False, verbose=0)
    for name, make in makers.items():
        setattr(gen_dataset_ops, name, watched(name, make))
    try:
        model.fit(x, y, batch_size=24, epochs=3, shuffle=False, verbose=0)
    finally:
        for name, make in makers.items():
            setattr(gen_dataset_ops, name, make)
    assert made.count("anonymous_multi_device_iterator_v3") == 3, made  # one iterator per epoch
    deadline = time.monotonic() + 30
    while len(deleted_on) < len(made) and time.monotonic() < deadline:
        gc.collect()  # breaks any cycle that holds an iterator; bps_tf, the resources' other holder, deletes them
        time.sleep(0.01)
    assert deleted_on == ["bps_tf-iterator-delete"] * len(made), (made, deleted_on)


def check_xla_needs_one_device_per_process(strategy):
    """XLA compiles each replica for its device alone: several devices in a process is a clear error."""
    if len(strategy.extended.worker_devices) == 1:
        return  # one GPU per process (the GPU checks): XLA runs, as strategy_xla.py checks
    x, y = data()
    with strategy.scope():
        model = make_model()
        model.compile(optimizer="sgd", loss="binary_crossentropy", jit_compile=True)
    try:
        model.fit(x, y, batch_size=24, epochs=1, verbose=0)
    except ValueError as error:
        assert "one device per process" in str(error) and "jit_compile=False" in str(error), error
        return
    raise AssertionError("jit_compile=True with several devices per process was not refused")


def check_datasets_from_function(strategy):
    """Each worker's dataset_fn sees the global number of pipelines and its own id."""
    seen = []

    def dataset_fn(context):
        seen.append((context.num_input_pipelines, context.input_pipeline_id, context.num_replicas_in_sync))
        batch = context.get_per_replica_batch_size(8 * strategy.num_replicas_in_sync)
        return tf.data.Dataset.range(64).shard(context.num_input_pipelines, context.input_pipeline_id).batch(batch)

    distributed = strategy.distribute_datasets_from_function(dataset_fn)
    assert seen == [(bps_tf.size(), bps_tf.rank(), strategy.num_replicas_in_sync)], seen
    first = next(iter(distributed))
    local = strategy.experimental_local_results(first)
    assert all(int(t.shape[0]) == 8 for t in local), [t.shape for t in local]
    # This worker's shard: elements congruent to its rank.
    assert all(int(v) % bps_tf.size() == bps_tf.rank() for t in local for v in t.numpy())


def check_initial_values_come_from_worker_0(strategy):
    with strategy.scope():
        scalar = tf.Variable(float(bps_tf.rank()) + 1.5)
        keras.utils.set_random_seed(100 + bps_tf.rank())  # a different random start on every worker
        layer = keras.layers.Dense(4)
        layer.build((None, 3))
    assert float(scalar.numpy()) == 1.5, scalar.numpy()
    for replica_value in strategy.experimental_local_results(scalar):
        assert float(replica_value.numpy()) == 1.5
    assert_identical_everywhere([w for w in layer.get_weights()], "initial-values")


CHECKS = {
    "initial_values": check_initial_values_come_from_worker_0,
    "datasets_from_function": check_datasets_from_function,
    "evaluate_predict_metrics": check_evaluate_predict_and_metrics,
    "int32": check_int32,
    "mixed_precision": check_mixed_precision,
    "overflow_on_one_worker": check_overflow_on_one_worker_skips_everywhere,
    "apply_without_variables": check_loss_scale_apply_without_variables,
    "uneven": check_uneven_data,
    "one_iterator_per_epoch": check_one_iterator_per_epoch,
    "iterators_deleted_off_the_training_thread": check_iterator_resources_deleted_off_the_training_thread,
    "xla": check_xla_needs_one_device_per_process,
}


def main():
    strategy = BytePSStrategy()
    names = sys.argv[1:] or list(CHECKS)
    for name in names:
        CHECKS[name](strategy)
    print(f"rank {bps_tf.rank()}: strategy features ok: {' '.join(names)}", flush=True)
    bps_tf.shutdown()


if __name__ == "__main__":
    main()
