"""A worker of benchmarks/backup_workers.py: steps of simulated compute (a sleep) followed by push_pulls of
8 MB of gradients marked as such (backups=True), one worker slowed 5x: never ("none"), at every step
("persistent", the last rank), or one worker every 4th step, in turn ("transient"). Prints one JSON line with
its mean step time (after a first step that declares the tensors) and its late pushes. With "catch_up", a
worker behind (communication_counters()["rounds_behind"]) skips the compute of its next step."""

import json
import sys
import time

import numpy as np

import bps_tf.numpy as bps

SLOWDOWN = 5


def slowed(mode, rank, size, step):
    if mode == "persistent":
        return rank == size - 1
    if mode == "transient":
        return step % 4 == 0 and rank == (step // 4) % size
    return False


def main(mode, steps, compute_ms, catch_up):
    bps.init()
    rank, size = bps.rank(), bps.size()
    gradients = [np.ones(262144, np.float32) for _ in range(8)]

    def step(index):
        # Catching up: a worker behind the completed rounds takes their results without computing.
        if not (catch_up and bps.communication_counters()["rounds_behind"] > 0):
            time.sleep(compute_ms / 1000 * (SLOWDOWN if slowed(mode, rank, size, index) else 1))
        handles = [bps.push_pull_async(g, f"grad{i}", average=True, priority=-i, backups=True)
                   for i, g in enumerate(gradients)]
        for handle in handles:
            bps.synchronize(handle)

    step(-1)  # the declarations
    before, began = bps.communication_counters(), time.perf_counter()
    for index in range(steps):
        step(index)
    seconds, after = time.perf_counter() - began, bps.communication_counters()
    print(json.dumps({"rank": rank, "mode": mode, "backup_workers": bps.backup_workers(),
                      "slowed": mode == "persistent" and rank == size - 1, "step_ms": seconds / steps * 1000,
                      "late_pushes": after["late_pushes"] - before["late_pushes"]}), flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "catch_up")
