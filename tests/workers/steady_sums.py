"""push_pulls the same tensors step after step, checking every sum exactly, until a stop file appears (the
workers agree on the step to stop at): the job that attack and fault tests run against. Usage: steady_sums.py STOP_FILE."""

import sys
import time
from pathlib import Path

import numpy as np

import bps_tf.numpy as bps

# A scalar, a small tensor, and one of several partitions (4 MB each) on every server.
SIZES = {"scalar": (), "small": (1000,), "large": (3_000_003,)}


def main():
    stop = Path(sys.argv[1])
    bps.init()
    rank, size = bps.rank(), bps.size()
    print(f"rank {rank}: joined", flush=True)
    steps = 0
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        # Stop together: a worker that saw the file while another already pushed this step's tensors would
        # leave it waiting for a push that never comes.
        if bps.push_pull(np.array([float(stop.exists())], np.float32), "stop", average=False)[0] > 0:
            break
        for name, shape in SIZES.items():
            value = np.full(shape, rank + 1 + steps % 7, np.float32)
            total = bps.push_pull(value, name, average=False)
            expected = sum(r + 1 + steps % 7 for r in range(size))
            if not np.all(total == expected):
                print(f"rank {rank}: WRONG SUM of {name} at step {steps}: {np.unique(total)[:5]} != {expected}",
                      flush=True)
                sys.exit(3)
        steps += 1
    print(f"rank {rank}: {steps} steps exact", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
