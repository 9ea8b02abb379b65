"""The worker of benchmarks/message_cost.py: push_pulls --tensors float32 arrays of each size in --sizes, all
started at once (push_pull_async) and waited for together, over and over, through bps_tf's NumPy API.

The benchmark reads every process's CPU between the phases, so the worker talks to it line by line: for each
phase it prints `ready PHASE` and waits for a line on stdin, runs the loop, prints `done PHASE {json}` (the
loop's wall time and this process's communication counters' change) and waits again. A phase is SIZE:ROUNDS.
Arrays hold ones (an all-zero partition would travel without payload); every result is checked.
"""

import argparse
import json
import sys
import time

import numpy as np

import bps_tf.numpy as bps


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tensors", type=int, required=True, help="push_pulls in flight at once")
    parser.add_argument("--phases", required=True, help="SIZE:ROUNDS, comma-separated, in order")
    parser.add_argument("--warmup", type=int, default=20, help="untimed rounds before each phase's first")
    return parser.parse_args()


def say(line):
    print(line, flush=True)
    if sys.stdin.readline() == "":
        raise SystemExit("the benchmark went away")


def run(arrays, outputs, names, rounds):
    for _ in range(rounds):
        handles = [bps.push_pull_async(a, n, average=False, out=o) for a, n, o in zip(arrays, names, outputs)]
        for handle in handles:
            bps.synchronize(handle)


def main():
    args = parse_args()
    bps.init()
    for index, phase in enumerate(args.phases.split(",")):
        nbytes, rounds = (int(x) for x in phase.split(":"))
        arrays = [np.ones(nbytes // 4, np.float32) for _ in range(args.tensors)]
        outputs = [np.zeros_like(a) for a in arrays]
        names = [f"message_cost/{nbytes}/{i}" for i in range(args.tensors)]
        run(arrays, outputs, names, args.warmup)
        say(f"ready {index}")
        before = bps.communication_counters()
        start = time.perf_counter()
        run(arrays, outputs, names, rounds)
        wall = time.perf_counter() - start
        after = bps.communication_counters()
        expected = float(bps.size())
        if any(o[0] != expected or o[-1] != expected for o in outputs):
            raise AssertionError(f"wrong sums: {outputs[0][0]}, expected {expected}")
        changed = {k: after[k] - before[k] for k in after if not isinstance(after[k], dict)}
        say(f"done {index} " + json.dumps({"wall_s": wall, "counters": changed}))
    bps.shutdown()


if __name__ == "__main__":
    main()
