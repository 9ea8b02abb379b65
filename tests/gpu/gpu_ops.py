"""bps_tf's TensorFlow GPU kernels across real processes, against NumPy: push_pull and broadcast of every dtype
and odd sizes (eager and tf.function, outputs on the GPU), allgather of uneven rows and sparse gradients
through the GPU gather kernel, DistributedGradientTape equal to single-process training.

Worker r uses GPU r % (GPUs): run as a job of 2 worker machines (`--workers 2`), on one GPU or two.
Prints `rank R: gpu ops exact`."""

import sys

import numpy as np
import tensorflow as tf

GPUS = tf.config.list_physical_devices("GPU")

import bps_tf.tensorflow as hvd  # noqa: E402

DTYPES = [tf.float16, tf.bfloat16, tf.float32, tf.float64, tf.int32, tf.int64]
SHAPES = [(), (0,), (1,), (7,), (3, 5), (1_000_003,)]


def values(rank, shape, dtype):
    """Small integers that differ by worker: exact in every dtype and in any summation order."""
    n = int(np.prod(shape))
    return tf.constant(((np.arange(n) * 3 + rank) % 5 - 2).reshape(shape), dtype)


def as_numpy(tensor):
    return tf.cast(tensor, tf.float64).numpy()


def on_gpu(tensor):
    return "GPU" in tensor.device.upper()


def check_push_pull_and_broadcast(rank, size):
    in_function = tf.function(lambda t, name: hvd.allreduce(t, op=hvd.Sum, name=name), autograph=False)
    for dtype in DTYPES:
        for shape in SHAPES:
            expected = sum(as_numpy(values(r, shape, dtype)) for r in range(size))
            with tf.device("/GPU:0"):
                mine = values(rank, shape, dtype)
                for mode, run in (("eager", lambda t, n: hvd.allreduce(t, op=hvd.Sum, name=n)),
                                  ("function", in_function)):
                    name = f"gpu.{mode}.{dtype.name}.{shape}"
                    result = run(mine, name)
                    assert on_gpu(result), (name, result.device)
                    np.testing.assert_array_equal(as_numpy(result), expected, err_msg=name)
                root = size - 1
                result = hvd.broadcast(mine, root, name=f"gpu.broadcast.{dtype.name}.{shape}")
                assert on_gpu(result), result.device
                np.testing.assert_array_equal(as_numpy(result), as_numpy(values(root, shape, dtype)))
            averaged = hvd.allreduce(tf.cast(values(rank, shape, tf.float32), tf.float32), name=f"gpu.avg.{shape}")
            np.testing.assert_allclose(averaged.numpy(), sum(as_numpy(values(r, shape, tf.float32))
                                                             for r in range(size)) / size, rtol=1e-6)


def check_gather(rank, size):
    def rows(r):
        return tf.reshape(tf.range((r + 1) * 4, dtype=tf.float32) + 100 * r, [r + 1, 4])

    with tf.device("/GPU:0"):
        gathered = hvd.allgather(rows(rank), name="gpu.allgather")
    assert on_gpu(gathered), gathered.device
    np.testing.assert_array_equal(gathered.numpy(), np.concatenate([rows(r).numpy() for r in range(size)]))

    from bps_tf.ops import push_pull_slices

    def slices(r):
        return tf.IndexedSlices(tf.fill([2, 3], float(r + 1)), tf.constant([r, 5], tf.int64), tf.constant([8, 3]))

    with tf.device("/GPU:0"):
        summed = push_pull_slices([slices(rank)], "gpu.sparse", hvd.Sum)
    dense = np.zeros((8, 3))
    for r in range(size):
        for row in (r, 5):
            dense[row] += r + 1
    np.testing.assert_array_equal(tf.convert_to_tensor(summed).numpy(), dense)


def check_tape(rank, size):
    tf.config.experimental.enable_tensor_float_32_execution(False)  # exact float32 matmuls for the comparison
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8 * size, 5)).astype(np.float32)
    y = rng.standard_normal((8 * size, 1)).astype(np.float32)
    w0 = rng.standard_normal((5, 1)).astype(np.float32)

    def loss(w, xs, ys):
        return tf.reduce_mean((tf.matmul(xs, w) - ys) ** 2)

    with tf.device("/GPU:0"):
        w = tf.Variable(w0)
        reference = tf.Variable(w0)
        for step in range(3):
            with tf.GradientTape() as tape:
                value = loss(w, x[rank::size], y[rank::size])
            tape = hvd.DistributedGradientTape(tape)
            (grad,) = tape.gradient(value, [w])
            assert on_gpu(grad), grad.device
            w.assign_sub(0.1 * grad)
            with tf.GradientTape() as tape:
                value = loss(reference, x, y)
            reference.assign_sub(0.1 * tape.gradient(value, reference))
    np.testing.assert_allclose(w.numpy(), reference.numpy(), rtol=1e-5, atol=1e-6)


def main():
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    assert GPUS, "no GPU visible"
    tf.config.set_visible_devices(GPUS[rank % len(GPUS)], "GPU")
    assert hvd.cuda_built() and hvd.nccl_built(), "the op library was built without CUDA"
    check_push_pull_and_broadcast(rank, size)
    check_gather(rank, size)
    check_tape(rank, size)
    print(f"rank {rank}: gpu ops exact", flush=True)
    hvd.shutdown()


if __name__ == "__main__":
    sys.exit(main())
