"""Workers whose lives end in different ways, for the failure tests. Usage: lifecycle.py MODE.

raise: worker 1 raises an uncaught exception after a few steps; the others push_pull until the job fails.
exit: worker 1 calls sys.exit(1) after a few steps (bps_tf leaves the job at exit); likewise.
generations: every worker runs two generations (init, push_pull, shutdown, twice) and checks the sums.
reinit-after-failure: worker 1 dies; worker 0 sees the job fail, then tries init() again.
Failures are reported as "failed after S s: Type: message" and exit code 7."""

import os
import sys
import time

import numpy as np

import bps_tf.numpy as bps


def loop_until_failure(rank, steps_before_trouble, trouble):
    tensor = np.ones(100_000, np.float32)
    step = 0
    last_success = time.monotonic()
    while True:
        if rank == 1 and step == steps_before_trouble:
            trouble()  # outside the try: the exception is the user's, uncaught
        try:
            bps.push_pull(tensor, "grad", average=False)
        except Exception as error:  # the expected failure
            print(f"rank {rank}: failed after {time.monotonic() - last_success:.2f} s: {type(error).__name__}: "
                  f"{error}", flush=True)
            sys.exit(7)
        last_success = time.monotonic()
        step += 1
        time.sleep(0.01)


def boom():
    raise ValueError("boom in the training loop of worker 1")


def generations():
    for generation in range(2):
        started = time.monotonic()
        bps.init()
        rank, size = bps.rank(), bps.size()
        for name in ("a", "b", f"only in generation {generation}"):
            total = bps.push_pull(np.full(1000, rank + generation, np.float32), name, average=False)
            assert np.all(total == sum(r + generation for r in range(size))), (name, total[:3])
        bps.shutdown()
        print(f"rank {rank}: generation {generation} exact in {time.monotonic() - started:.1f} s", flush=True)


def reinit_after_failure():
    bps.init()
    if bps.rank() == 1:
        os._exit(3)
    try:
        bps.push_pull(np.ones(3, np.float32), "x", average=False)
    except Exception as error:
        print(f"rank 0: the job failed: {error}", flush=True)
    try:
        bps.shutdown()
    except Exception:
        pass  # the failure again
    started = time.monotonic()
    try:
        bps.init()
        print("rank 0: init again succeeded", flush=True)
    except Exception as error:
        print(f"rank 0: init again failed after {time.monotonic() - started:.2f} s: {error}", flush=True)


def main():
    mode = sys.argv[1]
    if mode == "generations":
        return generations()
    if mode == "reinit-after-failure":
        return reinit_after_failure()
    bps.init()
    print(f"rank {bps.rank()}: joined", flush=True)
    loop_until_failure(bps.rank(), 20, boom if mode == "raise" else lambda: sys.exit(1))


if __name__ == "__main__":
    main()
