"""TensorFlow tensors summed in place: a server on the host reads them where they lie in the worker's memory
and writes the sums there (TensorFlow's memory, with jemalloc and bps_tf's router, which bpslaunch preloads). Every dtype, odd sizes,
eager and in a tf.function, an input TensorFlow forwards as the output, checked against NumPy; then each worker
reports whether its pushes went in place.

IN_PLACE_OFF_WORKER=<id>: that worker runs with BYTEPS_IN_PLACE_PUSHES=0 (its pushes are copied, the other's
rounds mix both kinds)."""

import os

import numpy as np

from sums import check, data, dtype_of

DTYPES = ["float16", "bfloat16", "float32", "float64", "int32", "int64"]


def main():
    if os.environ.get("IN_PLACE_OFF_WORKER") == os.environ.get("DMLC_WORKER_ID"):
        os.environ["BYTEPS_IN_PLACE_PUSHES"] = "0"
    import tensorflow as tf

    import bps_tf.numpy as bps_numpy
    import bps_tf.tensorflow as bps

    bps.init()
    rank, size = bps.rank(), bps.size()
    checked = 0
    for dtype_name in DTYPES:
        n = (8 << 20) // dtype_of(dtype_name).itemsize + 12345
        for round_ in range(2):
            # (A constant may share the NumPy array's memory; the product is TensorFlow's own.)
            x = tf.constant(data(rank, dtype_name, n, round_)) * 1
            got = bps.push_pull(x, name=f"{dtype_name}/{n}", op=bps.Sum)
            assert got.dtype == x.dtype and got.shape == (n,)
            check(dtype_name, got.numpy(), size, round_)
            checked += 1

    n = (12 << 20) // 4 + 3
    x = tf.constant(data(rank, "float32", n, 0))

    @tf.function
    def summed(t):
        return bps.push_pull(t * 1.0, name="in a function", op=bps.Sum)  # the product is forwarded as output

    for _ in range(3):
        check("float32", summed(x).numpy(), size, 0)
        checked += 1
    in_place = bps_numpy.communication_counters()["bytes_pushed_in_place"]
    print(f"rank {rank}: {checked} in-place cases exact", flush=True)
    print(f"rank {rank}: pushed in place {'yes' if in_place > 0 else 'no'}", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
