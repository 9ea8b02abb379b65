"""The local demo job: each worker sums real tensors with the others through the parameter servers,
checks every result against the exact answer, and reports what moved and how fast.

Run it with `make demo`, or: bpslaunch --local --workers 2 --servers 1 -- python examples/push_pull_demo.py
"""

import time

import numpy as np

import bps_tf.numpy as bps

# A model-like set of gradients: a few large layers and many small ones (float32), ~100 MB in all.
LAYER_SHAPES = [(4096, 4096), (4096, 1024), (1024, 1024), (1024,), (1000, 1024), (1000,)] + [(256, 256)] * 40
ROUNDS = 5


def main():
    bps.init()
    rank, size = bps.rank(), bps.size()
    rng = np.random.default_rng(1234)
    # Every worker can compute every worker's tensors, so the expected sum is known exactly.
    base = [rng.integers(-50, 50, size=shape).astype(np.float32) for shape in LAYER_SHAPES]
    total_bytes = sum(b.nbytes for b in base)
    if rank == 0:
        print(f"{size} workers, {len(base)} tensors, {total_bytes / 1e6:.1f} MB per round, {ROUNDS} rounds")

    elapsed = []
    for round_index in range(ROUNDS):
        mine = [b * (rank + 1) + round_index for b in base]
        start = time.perf_counter()
        # All tensors in flight at once, layers nearer the input first (higher priority).
        handles = [
            bps.push_pull_async(t, f"layer{i}", priority=len(mine) - i, average=False) for i, t in enumerate(mine)
        ]
        results = [bps.synchronize(h) for h in handles]
        elapsed.append(time.perf_counter() - start)
        factor = size * (size + 1) / 2
        for b, got in zip(base, results):
            np.testing.assert_array_equal(got, b * factor + round_index * size)

    best = min(elapsed[1:]) if len(elapsed) > 1 else elapsed[0]
    print(
        f"worker {rank}: all {ROUNDS} rounds exact; best round {best * 1e3:.1f} ms = "
        f"{total_bytes / best / 1e6:.0f} MB/s push_pull bandwidth (each byte pushed and pulled)"
    )
    bps.shutdown()


if __name__ == "__main__":
    main()
