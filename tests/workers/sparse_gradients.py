"""Sparse gradients (an embedding's IndexedSlices) across workers, each against a single-process reference:
the gathered rows themselves (uneven row counts per worker), BytePSStrategy's Keras fit on N workers x D
logical devices, DistributedGradientTape and DistributedOptimizer. The sparse path must be the one taken where gathering is
smaller (or the row count is unknown), and the dense one where the table is smaller than all workers' rows."""


import numpy as np
import tensorflow as tf

from testing.worker_setup import devices_from_argv_and_keras, tolerance  # noqa: E402

RTOL, ATOL = tolerance()

LOCAL_DEVICES, keras = devices_from_argv_and_keras()

import bps_tf  # noqa: E402
import bps_tf.ops.gather as gather  # noqa: E402
from bps_tf.strategy import BytePSStrategy  # noqa: E402

STEPS, GLOBAL_BATCH, TOKENS = 5, 12, 4
sparse_calls = []  # names of the sparse reductions issued (traced), to prove which path ran
_original = gather.push_pull_slices


def _counting(local_slices, name, *args, **kwargs):
    sparse_calls.append(name)
    return _original(local_slices, name, *args, **kwargs)


def make_model(vocab):
    keras.utils.set_random_seed(3)
    return keras.Sequential([keras.Input((TOKENS,), dtype="int32"), keras.layers.Embedding(vocab, 3),
                             keras.layers.Flatten(), keras.layers.Dense(1)])


def data(vocab):
    rng = np.random.default_rng(9)
    x = rng.integers(0, vocab, size=(STEPS * GLOBAL_BATCH, TOKENS), dtype=np.int32)
    return x, (x % 3).sum(axis=1, keepdims=True).astype(np.float32) / 10


def fit(model, x, y):
    model.compile(optimizer=keras.optimizers.SGD(0.5), loss="mse")
    model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=1, shuffle=False, verbose=0)
    return model.get_weights()


def check_gathered_rows(rank, size):
    """Worker r contributes r + 1 rows: the result is every worker's rows in rank order, the same everywhere."""
    rows = rank + 1
    mine = tf.IndexedSlices(tf.fill([rows, 2], float(rank)), tf.range(rows, dtype=tf.int64) + 10 * rank,
                            tf.constant([100, 2], tf.int64))
    got = tf.function(lambda s: gather.push_pull_slices([s], "test.uneven"))(mine)
    want_values = np.concatenate([np.full([r + 1, 2], float(r), np.float32) for r in range(size)])
    want_indices = np.concatenate([np.arange(r + 1) + 10 * r for r in range(size)])
    np.testing.assert_array_equal(got.values.numpy(), want_values)
    np.testing.assert_array_equal(got.indices.numpy(), want_indices)
    assert tuple(got.dense_shape.numpy()) == (100, 2)


def check_all_gather(rank, size):
    """Uneven lengths along either axis (worker 0 has none along axis 1), eagerly and in tf.function, with the
    gradient: each worker's part receives the sum of every worker's gradient at its place."""
    lengths = [r for r in range(size)]

    def part(r):
        return tf.reshape(tf.range(2 * lengths[r] * 3, dtype=tf.float32) + 100.0 * r, [2, lengths[r], 3])

    want = np.concatenate([part(r).numpy() for r in range(size)], axis=1)
    weights = tf.reshape(tf.range(want.size, dtype=tf.float32), want.shape)
    mine = tf.Variable(part(rank))

    def gathered_and_grad():
        with tf.GradientTape() as tape:
            got = gather.all_gather(mine, 1, "test.axis1")
            loss = tf.reduce_sum(got * weights)
        return got, tape.gradient(loss, mine)

    before = sum(lengths[:rank])
    for run in (gathered_and_grad, tf.function(gathered_and_grad)):
        got, grad = run()
        np.testing.assert_array_equal(got.numpy(), want)
        np.testing.assert_array_equal(grad.numpy(), size * weights.numpy()[:, before:before + lengths[rank], :])
    rows = tf.fill([rank + 1, 2], rank + 1)  # int32 along axis 0
    got = tf.function(lambda t: gather.all_gather(t, 0, "test.axis0"))(rows)
    np.testing.assert_array_equal(got.numpy(), np.concatenate([np.full([r + 1, 2], r + 1) for r in range(size)]))


def check_strategy_fit(strategy, vocab, expect_sparse):
    x, y = data(vocab)
    reference = fit(make_model(vocab), x, y)
    before = len(sparse_calls)
    with strategy.scope():
        model = make_model(vocab)
    got = fit(model, x, y)
    for g, w in zip(got, reference):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)
    # Under XLA (jit_compile="auto" compiles with it on one GPU per process) gradients are reduced dense.
    expect_sparse = expect_sparse and not model.jit_compile
    assert (len(sparse_calls) > before) == expect_sparse, (vocab, sparse_calls)


def check_horovod_api(rank, size, vocab, expect_sparse, wrap):
    """wrap: "tape" (DistributedGradientTape) or "optimizer" (DistributedOptimizer)."""
    x, y = data(vocab)
    per_worker = GLOBAL_BATCH // size
    model, reference = make_model(vocab), make_model(vocab)
    optimizer, reference_optimizer = keras.optimizers.SGD(0.5), keras.optimizers.SGD(0.5)
    if wrap == "optimizer":
        optimizer = bps_tf.DistributedOptimizer(optimizer)
    loss_fn = lambda m, a, b: tf.reduce_mean(tf.square(m(a) - b))
    before = len(sparse_calls)

    @tf.function
    def step(a, b):
        with tf.GradientTape() as tape:
            loss = loss_fn(model, a, b)
        if wrap == "tape":
            tape = bps_tf.DistributedGradientTape(tape)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))

    for i in range(STEPS):
        batch = slice(i * GLOBAL_BATCH, (i + 1) * GLOBAL_BATCH)
        shard = slice(i * GLOBAL_BATCH + rank * per_worker, i * GLOBAL_BATCH + (rank + 1) * per_worker)
        step(x[shard], y[shard])
        with tf.GradientTape() as tape:
            loss = loss_fn(reference, x[batch], y[batch])
        reference_optimizer.apply_gradients(zip(tape.gradient(loss, reference.trainable_variables),
                                                reference.trainable_variables))
    for g, w in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL)
    assert (len(sparse_calls) > before) == expect_sparse, (vocab, sparse_calls)


def main():
    gather.push_pull_slices = _counting
    import bps_tf.strategy.cross_device_ops as cross_device_ops
    import bps_tf.tensorflow.gradients as gradients

    cross_device_ops.push_pull_slices = gradients.push_pull_slices = _counting
    strategy = BytePSStrategy()
    rank, size = bps_tf.rank(), bps_tf.size()
    check_gathered_rows(rank, size)
    check_all_gather(rank, size)
    # 12 examples x 4 tokens: 48 rows in all, against a table of 200 rows (sparse) or of 20 (dense).
    # fit's batches have no static size: the row count is unknown when the step is traced, so rows are gathered.
    check_strategy_fit(strategy, 200, expect_sparse=True)
    check_strategy_fit(strategy, 20, expect_sparse=True)
    for wrap in ["tape", "optimizer"]:
        check_horovod_api(rank, size, 200, expect_sparse=True, wrap=wrap)
        check_horovod_api(rank, size, 20, expect_sparse=False, wrap=wrap)
    print(f"rank {rank}: sparse gradients equal single-process training", flush=True)
    bps_tf.shutdown()


if __name__ == "__main__":
    main()
