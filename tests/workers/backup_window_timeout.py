"""Backup workers with BYTEPS_BACKUP_WINDOW=1 and a short BYTEPS_TIMEOUT: the last worker stops pushing after
its first step; the others go on one round, then their next round is held for it and fails after
BYTEPS_TIMEOUT, naming it, instead of waiting for good."""

import time

import numpy as np

import bps_tf.numpy as bps


def main():
    bps.init()
    rank, size = bps.rank(), bps.size()
    gradient = np.ones(1000, np.float32)
    if rank == size - 1:
        bps.push_pull(gradient, "g", backups=True)
        print(f"rank {rank}: pushed one round, stopping", flush=True)
        time.sleep(60)  # the job ends before this
        return
    began = time.monotonic()
    try:
        for _ in range(10):
            bps.push_pull(gradient, "g", backups=True)
        raise AssertionError("the window did not hold the rounds")
    except TimeoutError as error:
        assert f"worker(s) {size - 1} stayed more than BYTEPS_BACKUP_WINDOW=1 rounds behind" in str(error), error
    print(f"rank {rank}: held round failed after {time.monotonic() - began:.1f} s naming the worker behind",
          flush=True)
    raise SystemExit(3)  # ends the job (bpslaunch stops the sleeping worker)


if __name__ == "__main__":
    main()
