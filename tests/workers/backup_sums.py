"""Backup workers (BYTEPS_BACKUP_WORKERS=b): every worker pushes gradients marked backups=True, worker SLOW_RANK
sleeping before each step. Each worker's value is (1 << rank) times small integers, so a round's sum names its
contributors: each round must sum exactly size - b distinct workers, scaled by size / (size - b), be identical
on every worker, and this worker's late_pushes counter must equal the rounds it was left out of."""

import os
import time
import zlib

import ml_dtypes
import numpy as np

import bps_tf.numpy as bps
from bps_tf._native import load_core

STEPS = int(os.environ.get("BACKUP_STEPS", "12"))
SLOW_RANK = int(os.environ.get("SLOW_RANK", "1"))
SLOW_SECONDS = float(os.environ.get("SLOW_SECONDS", "0.1"))
# (name, dtype, elements): small ones travel fused without shared memory; float32 ones of several partitions
# have several keys, each with contributors of its own.
TENSORS = [("w/small", "float32", 7), ("w/half", "float16", 33), ("w/brain", "bfloat16", 5),
           ("w/double", "float64", 1000), ("w/mid", "float32", 100_000), ("w/large", "float32", 1_500_000)]


def keys_of(elements, dtype):
    """[start, stop) of each partition (key) of a tensor, as the planner cuts it."""
    float32_elements = elements * dtype_of(dtype).itemsize // 4
    plan = load_core().plan_partitions(int(os.environ["DMLC_NUM_SERVER"]),
                                       int(os.environ.get("BYTEPS_PARTITION_BYTES", 4096000)), 0,
                                       [float32_elements])[0]
    assert dtype == "float32" or len(plan) == 1, plan
    bounds = np.cumsum([0] + [count for _, count in plan]).tolist()
    return list(zip(bounds[:-1], bounds[1:]))


def dtype_of(name):
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def value(rank, elements, dtype):
    """(1 << rank) times 1, 2 or 3; element 0 is 1 << rank itself."""
    return ((1 << rank) * (1 + np.arange(elements) % 3)).astype(dtype_of(dtype))


def expected(mask, elements, dtype, scale):
    """What a server returns for the contributors in `mask`: the sum in the accumulator's type (float32 for
    16-bit floats), times the scale in that type, in the tensor's dtype."""
    wide = np.float64 if dtype == "float64" else np.float32
    total = mask * (1 + np.arange(elements) % 3)
    return (total.astype(wide) * (wide(scale[0]) / wide(scale[1]))).astype(dtype_of(dtype))


def contributors(result, start, stop, scale):
    """The bitmask of the workers summed into elements [start, stop) of `result`, from the first one, to which
    each worker contributed (1 << rank) * (1 + start % 3)."""
    return int(round(float(result[start]) * scale[1] / scale[0] / (1 + start % 3)))


def check(name, dtype, elements, result, size, backups):
    """The masks of the keys of this result (one per partition); checks each part is exactly their sum."""
    scale = (size, size - backups)
    masks = []
    for start, stop in keys_of(elements, dtype):
        mask = contributors(result, start, stop, scale)
        assert bin(mask).count("1") == size - backups and mask < (1 << size), f"{name}: contributors {mask:b}"
        want = expected(mask, elements, dtype, scale)[start:stop]
        np.testing.assert_array_equal(result[start:stop], want, err_msg=f"{name}[{start}:{stop}] mask {mask:b}")
        masks.append(mask)
    return masks


def main():
    bps.init()
    rank, size, backups = bps.rank(), bps.size(), int(os.environ["BYTEPS_BACKUP_WORKERS"])
    window = int(os.environ.get("BYTEPS_BACKUP_WINDOW", 4))
    digest = 0
    left_out = 0
    most_behind = 0
    before = bps.communication_counters()
    for step in range(STEPS):
        if rank == SLOW_RANK:
            time.sleep(SLOW_SECONDS)
        handles = [(t, bps.push_pull_async(value(rank, t[2], t[1]), t[0], average=False, backups=True))
                   for t in TENSORS]
        for (name, dtype, elements), handle in handles:
            result = bps.synchronize(handle)
            masks = check(name, dtype, elements, result, size, backups)
            left_out += sum(1 for mask in masks if not mask >> rank & 1)
            digest = zlib.crc32(result.tobytes(), digest)
        # A worker is never further behind than the window: the servers hold the rounds after it.
        behind = bps.communication_counters()["rounds_behind"]
        assert 0 <= behind <= window, f"{behind} rounds behind with BYTEPS_BACKUP_WINDOW={window}"
        most_behind = max(most_behind, behind)
    after = bps.communication_counters()
    late = after["late_pushes"] - before["late_pushes"]
    assert late == left_out, f"late_pushes {late}, but left out of {left_out} rounds"
    # Averages divide the scaled sum by size: the contributors' mean.
    mean = bps.push_pull(np.full(4, float(rank + 1), np.float64), "w/mean", backups=True)
    assert len(set(mean.tolist())) == 1, mean
    # join() would leave a worker that never pushes again, which the servers' window would wait for.
    try:
        bps.join()
        raise AssertionError("join() was not refused")
    except RuntimeError as error:
        assert "join() is not offered with backup workers" in str(error), error
    # Every worker got the same bytes: the largest and smallest digest agree (a synchronous push_pull).
    extremes = bps.push_pull(np.array([digest, -digest], np.int64), "digests", average=False, op="max")
    assert extremes[0] == digest and -extremes[1] == digest, (digest, extremes)
    print(f"rank {rank}: left out of {left_out} rounds, {late} late pushes counted, at most {most_behind} "
          "rounds behind", flush=True)
    print(f"rank {rank}: backup sums exact and identical", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
