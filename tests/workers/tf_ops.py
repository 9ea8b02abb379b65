"""The TensorFlow ops against NumPy, eagerly and inside tf.function: every dtype, scalars, empty tensors,
odd shapes; broadcast; gradients; fp16 compression; sparse gradients; broadcast_variables/object."""

import numpy as np
import tensorflow as tf

import bps_tf as bps

DTYPES = [tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int32, tf.int64]
SHAPES = [(), (0,), (1,), (7,), (3, 5, 7), (2, 0, 3), (1000, 33)]


def value(rank, shape, dtype):
    """Small integers: exact in every dtype, different on every worker."""
    n = int(np.prod(shape))
    return tf.cast(tf.reshape(tf.range(n) % 13 - 6 + rank, shape), dtype)


def expected_sum(shape, dtype, size):
    return sum(value(r, shape, dtype).numpy().astype(np.float64) for r in range(size))


def check_push_pull(rank, size):
    graph_push_pull = tf.function(lambda t, name: bps.push_pull(t, name=name, op=bps.Sum))
    for dtype in DTYPES:
        for shape in SHAPES:
            for mode, run in (("eager", lambda t, n: bps.push_pull(t, name=n, op=bps.Sum)),
                              ("function", graph_push_pull)):
                name = f"{mode}/{dtype.name}/{shape}"
                got = run(value(rank, shape, dtype), name)
                assert got.dtype == dtype and tuple(got.shape) == shape, (name, got.dtype, got.shape)
                np.testing.assert_array_equal(got.numpy().astype(np.float64), expected_sum(shape, dtype, size),
                                              err_msg=name)
        if dtype.is_floating:
            mean = bps.push_pull(value(rank, (4, 4), dtype), name=f"mean/{dtype.name}")  # op=Average default
            np.testing.assert_allclose(mean.numpy().astype(np.float64), expected_sum((4, 4), dtype, size) / size,
                                       rtol=1e-2)


def check_broadcast(rank, size):
    for root in range(size):
        for dtype in DTYPES:
            for shape in [(), (0,), (5, 3)]:
                got = bps.broadcast(value(rank, shape, dtype), root_rank=root, name=f"{root}/{dtype.name}/{shape}")
                np.testing.assert_array_equal(got.numpy(), value(root, shape, dtype).numpy())
    try:
        bps.broadcast(tf.ones(2), root_rank=size, name="bad-root")
        raise AssertionError("a root_rank out of range was accepted")
    except tf.errors.InvalidArgumentError as error:
        assert "root_rank" in str(error)


def check_gradients(rank, size):
    x = tf.Variable(tf.fill([5], float(rank + 1)))
    with tf.GradientTape() as tape:
        summed = bps.push_pull(x * x, name="grad-input", op=bps.Sum)
        loss = tf.reduce_sum(summed * float(rank + 1))
    grad = tape.gradient(loss, x)
    # d/dx_r of sum_s c_s * sum_q x_q^2 = 2 x_r * sum_s c_s, with c_s = s + 1.
    expected = 2.0 * (rank + 1) * sum(s + 1 for s in range(size))
    np.testing.assert_allclose(grad.numpy(), np.full(5, expected))

    y = tf.Variable(tf.fill([3], float(rank + 1)))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(bps.broadcast(y, root_rank=0, name="grad-broadcast") * 2.0)
    grad = tape.gradient(loss, y)
    np.testing.assert_allclose(grad.numpy(), np.full(3, 2.0 * size if rank == 0 else 0.0))


def check_compression(rank, size):
    x = tf.constant(np.linspace(-3, 3, 1001) * (rank + 1), tf.float32)
    got = bps.push_pull(x, name="fp16", op=bps.Sum, compression=bps.Compression.fp16)
    assert got.dtype == tf.float32
    exact = np.linspace(-3, 3, 1001) * sum(r + 1 for r in range(size))
    np.testing.assert_allclose(got.numpy(), exact, rtol=2e-3, atol=2e-3)


def check_sparse(rank, size):
    slices = tf.IndexedSlices(values=tf.fill([2, 3], float(rank + 1)), indices=tf.constant([0, 2]),
                              dense_shape=tf.constant([4, 3]))
    got = bps.push_pull(slices, name="sparse", op=bps.Sum).numpy()
    total = sum(r + 1 for r in range(size))
    np.testing.assert_array_equal(got, [[total] * 3, [0] * 3, [total] * 3, [0] * 3])


def check_broadcast_helpers(rank, size):
    variables = [tf.Variable(tf.fill([3, 2], float(rank))), tf.Variable(rank, dtype=tf.int64)]
    bps.broadcast_variables(variables, root_rank=size - 1)
    np.testing.assert_array_equal(variables[0].numpy(), np.full((3, 2), size - 1.0))
    assert variables[1].numpy() == size - 1
    obj = bps.broadcast_object({"rank": rank, "text": "é" * (rank + 5)}, root_rank=0)
    assert obj == {"rank": 0, "text": "é" * 5}, obj
    obj = bps.broadcast_object(list(range(rank + 100)), root_rank=size - 1)
    assert obj == list(range(size - 1 + 100))


def check_every_call_communicates(rank, size):
    """A push_pull runs at every call of a tf.function, however its input is made: constant on one worker and
    a variable's value on another must still pair call for call (an op TensorFlow may fold or merge would
    run once on the first and every time on the second)."""
    variable = tf.Variable(float(rank + 1))
    source = (lambda: tf.constant(1.0)) if rank == 0 else variable.read_value

    @tf.function
    def twice():
        return bps.push_pull(source(), name="every-call", op=bps.Sum), bps.push_pull(source(), name="again", op=bps.Sum)

    expected = 1.0 + sum(float(r + 1) for r in range(1, size))
    for _ in range(3):
        first, second = twice()
        assert first.numpy() == expected and second.numpy() == expected, (first.numpy(), second.numpy(), expected)


def check_misuse(rank):
    try:
        bps.push_pull(tf.constant([1, 2], tf.complex64), name="c64")
        raise AssertionError("complex64 was accepted")
    except ValueError as error:
        assert "unsupported dtype complex64" in str(error), error
    bps.push_pull(tf.ones([4]), name="reused")
    try:
        bps.push_pull(tf.ones([5]), name="reused")
        raise AssertionError("one name for two tensors was accepted")
    except tf.errors.InvalidArgumentError as error:
        assert "two different tensors" in str(error), error
    try:
        bps.push_pull(tf.constant([1, 2]), name="int-average")
        raise AssertionError("Average of integers was accepted")
    except ValueError as error:
        assert "op=bps.Sum" in str(error)


def main():
    bps.init()
    rank, size = bps.rank(), bps.size()
    check_push_pull(rank, size)
    check_broadcast(rank, size)
    check_gradients(rank, size)
    check_compression(rank, size)
    check_sparse(rank, size)
    check_broadcast_helpers(rank, size)
    check_every_call_communicates(rank, size)
    check_misuse(rank)
    print(f"rank {rank}: tf ops exact", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
