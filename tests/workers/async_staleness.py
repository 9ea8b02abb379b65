"""Bounded staleness on the NumPy API: the last worker's step takes 5 times as long as the others'. Each worker
pushes STEPS changes of one tensor (worker r adds r + 1 each step) and writes, per step, when it started the
push, when the reply came and the value it got, to ASYNC_DIR/steps.<rank>.json; the test checks from those that
no reply let a worker lead the slowest by more than BYTEPS_STALENESS steps."""

import json
import os
import time
from pathlib import Path

import numpy as np

import bps_tf.numpy as bps

STEPS = 20
STEP_SECONDS = 0.02


def main():
    bps.init()
    rank, size = bps.rank(), bps.size()
    assert bps.staleness() is not None, "run with BYTEPS_STALENESS set"
    slow = rank == size - 1
    bps.push_pull(np.zeros(4), "clock", average=False, op="weights")  # the initial weights
    steps = []
    for step in range(1, STEPS + 1):
        time.sleep(STEP_SECONDS * (5 if slow else 1))
        started = time.time()
        weights = bps.push_pull(np.full(4, rank + 1.0), "clock", average=False, op="weights")
        steps.append({"step": step, "started": started, "replied": time.time(), "value": float(weights[0])})
    Path(os.environ["ASYNC_DIR"], f"steps.{rank}.json").write_text(json.dumps(steps))
    print(f"rank {rank}: {STEPS} steps{' (slow)' if slow else ''}", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
