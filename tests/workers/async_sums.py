"""Asynchronous training on the NumPy API: every worker pushes its own changes of two float64 tensors (one
small, one of several partitions over both servers) and one float32 tensor, at its own pace; nobody waits for
another. Then the workers meet (a synchronous sum, which asynchronous training leaves as it is) and pull the
servers' weights once more (a change of zeros):
they must be the initial weights plus every change any worker pushed, exactly for float64 (the changes are
multiples of 1/8, whose sums are exact in any order), within rounding for float32; and the same on every worker.
"""

import hashlib
import time
import zlib

import numpy as np

import bps_tf.numpy as bps

STEPS = 25
SHAPES = {"async.small": (1000, "float64"), "async.large": (700_000, "float64"), "async.f32": (5000, "float32")}


def initial(name):
    n, dtype = SHAPES[name]
    return np.random.default_rng(zlib.crc32(name.encode())).integers(-100, 100, n).astype(dtype)


def change(name, rank, step):
    n, dtype = SHAPES[name]
    rng = np.random.default_rng(zlib.crc32(f"{name}/{rank}/{step}".encode()))
    if dtype == "float32":
        return (rng.standard_normal(n) * 1e-2).astype(dtype)
    return (rng.integers(-64, 64, n) * 0.125).astype(dtype)


def main():
    bps.init()
    rank, size = bps.rank(), bps.size()
    assert bps.is_async(), "run with BYTEPS_ENABLE_ASYNC=1"
    rng = np.random.default_rng(rank)
    for name in SHAPES:
        weights = bps.push_pull(initial(name), name, average=False, op="weights")
        # Every worker sends the same; the first sets it, and others' changes may be in the reply already.
        assert weights.shape == initial(name).shape and weights.dtype == initial(name).dtype
    for step in range(STEPS):
        for name in SHAPES:
            weights = bps.push_pull(change(name, rank, step), name, average=False, op="weights")
            assert weights.shape == (SHAPES[name][0],) and weights.dtype == SHAPES[name][1]
        time.sleep(rng.uniform(0, 0.02) * (rank + 1))  # different paces: the pushes interleave
    # Every worker has pushed all its changes once this sum completes; it is a sum, as ever.
    ranks = bps.push_pull(np.array([rank], np.int64), "barrier", average=False)
    assert int(ranks[0]) == sum(range(size)), ranks
    digest = hashlib.sha256()
    for name, (n, dtype) in SHAPES.items():
        final = bps.push_pull(np.zeros(n, dtype), name, average=False, op="weights")
        expected = initial(name).astype(np.float64)
        for r in range(size):
            for step in range(STEPS):
                expected += change(name, r, step)
        if dtype == "float64":
            np.testing.assert_array_equal(final, expected, err_msg=name)
        else:
            # float32 adds in arrival order: within the rounding of size * STEPS additions.
            tolerance = size * STEPS * np.finfo(np.float32).eps * (np.abs(expected).max() + 1)
            np.testing.assert_allclose(final, expected, rtol=0, atol=tolerance, err_msg=name)
        digest.update(final.tobytes())
    print(f"rank {rank}: async sums exact, final weights {digest.hexdigest()[:16]}", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
