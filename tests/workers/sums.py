"""Every dtype and size summed across the job's workers, checked against NumPy, two rounds each (a key's
first round sets up what later rounds use, such as a server's shared memory).

NO_SHARED_MEMORY_WORKER=<id>: that worker runs with BYTEPS_SHARED_MEMORY=0. Each worker reports how many
server arenas it mapped."""

import os
import zlib

import ml_dtypes
import numpy as np

import bps_tf.numpy as bps

DTYPES = ["float16", "bfloat16", "float32", "float64", "int32", "int64"]
HALF_EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7}


def dtype_of(name):
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def sizes(itemsize):
    per_partition = int(os.environ.get("BYTEPS_PARTITION_BYTES", 4096000)) // itemsize
    return [0, 1, 7, per_partition - 1, per_partition, per_partition + 1, 10_000_003 // itemsize]


def data(rank, dtype_name, n, round_):
    rng = np.random.default_rng(zlib.crc32(f"{rank}/{dtype_name}/{n}/{round_}".encode()))
    if dtype_name in HALF_EPS:  # arbitrary values: the sum is rounded once
        return (rng.standard_normal(n) * 4).astype(dtype_of(dtype_name))
    # Integer-valued: the sum is exact whatever order the server adds in.
    return rng.integers(-1000, 1000, size=n).astype(dtype_of(dtype_name))


def check(dtype_name, got, size, round_):
    n = got.size
    inputs = [data(r, dtype_name, n, round_) for r in range(size)]
    if dtype_name in HALF_EPS:
        exact = np.sum([x.astype(np.float64) for x in inputs], axis=0)
        rounded_once = exact.astype(dtype_of(dtype_name)).astype(np.float64)
        # Within one rounding of the exact sum: at most one unit in the last place of the result.
        ulp = np.maximum(np.abs(rounded_once), 2.0**-14) * HALF_EPS[dtype_name]
        assert np.all(np.abs(got.astype(np.float64) - exact) <= ulp), f"{dtype_name}[{n}] off by more than one rounding"
    else:
        expected = np.sum(inputs, axis=0, dtype=dtype_of(dtype_name))
        np.testing.assert_array_equal(got, expected, err_msg=f"{dtype_name}[{n}]")


def shared_arenas_mapped():
    with open("/proc/self/maps") as maps:
        return sum("memfd:bps_tf_server" in line for line in maps)


def main():
    if os.environ.get("NO_SHARED_MEMORY_WORKER") == os.environ.get("DMLC_WORKER_ID"):
        os.environ["BYTEPS_SHARED_MEMORY"] = "0"
    bps.init()
    rank, size = bps.rank(), bps.size()
    checked = 0
    for dtype_name in DTYPES:
        for n in sizes(dtype_of(dtype_name).itemsize):
            for round_ in range(2):
                got = bps.push_pull(data(rank, dtype_name, n, round_), f"{dtype_name}/{n}", average=False)
                assert got.dtype == dtype_of(dtype_name) and got.shape == (n,)
                check(dtype_name, got, size, round_)
            checked += 1
    # Shapes other than vectors, scalars, and an average.
    scalar = bps.push_pull(np.array(rank + 1.5, dtype=np.float64), "scalar", average=False)
    assert scalar.shape == () and scalar == sum(r + 1.5 for r in range(size))
    matrix = bps.push_pull(np.full((3, 0, 5), rank, np.float32), "empty-matrix", average=False)
    assert matrix.shape == (3, 0, 5)
    odd = bps.push_pull(np.arange(3 * 5 * 7, dtype=np.int32).reshape(3, 5, 7) * (rank + 1), "odd-shape", average=False)
    np.testing.assert_array_equal(odd, np.arange(105, dtype=np.int32).reshape(3, 5, 7) * (size * (size + 1) // 2))
    mean = bps.push_pull(np.full(10, float(rank), np.float32), "mean", average=True)
    np.testing.assert_allclose(mean, np.full(10, (size - 1) / 2))
    print(f"rank {rank}: {checked} dtype/size cases exact", flush=True)
    print(f"rank {rank}: {shared_arenas_mapped()} server arenas mapped", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
