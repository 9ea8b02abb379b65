"""Bounded staleness with a worker that stops: the last worker pushes its initial weights, then stalls for
three times BYTEPS_TIMEOUT. The others' first change is held for it; each must fail within BYTEPS_TIMEOUT with
an error naming the stalled worker, which it prints before failing the job."""

import os
import time

import numpy as np

import bps_tf.numpy as bps


def main():
    bps.init()
    rank, size = bps.rank(), bps.size()
    bps.push_pull(np.zeros(4), "stall", average=False, op="weights")
    if rank == size - 1:
        time.sleep(3 * float(os.environ["BYTEPS_TIMEOUT"]))
        return
    started = time.monotonic()
    try:
        bps.push_pull(np.ones(4), "stall", average=False, op="weights")
    except Exception as error:  # noqa: BLE001 (the test reads the message)
        print(f"rank {rank}: held push failed after {time.monotonic() - started:.1f} s: {error}", flush=True)
        raise
    raise AssertionError("a push more than BYTEPS_STALENESS ahead of a stalled worker was answered")


if __name__ == "__main__":
    main()
