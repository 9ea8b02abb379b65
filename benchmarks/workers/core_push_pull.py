"""One worker of the step-model validation (benchmarks/step_model_validation.py): push_pulls through bps_tf's
NumPy API only (no TensorFlow: quick to start, no compute beside the communication), timed per call.

Two kinds of case, each the median of several calls after a warm-up call:
  single tensors of each size in --sizes;
  --tensor-sets: sets of tensors started together (push_pull_async) and waited for together, as a training
  step hands its gradients over (NAME=SIZE+SIZE+...).
Rank 0 writes the JSON.
"""

import argparse
import json

import numpy as np

import bps_tf.numpy as bps
from benchmarks.lib.measure import repeats_for, summary, time_calls


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="", help="comma-separated tensor sizes in bytes")
    parser.add_argument("--tensor-sets", default="", help="NAME=BYTES+BYTES+..., comma-separated")
    parser.add_argument("--budget-mb", type=float, default=64, help="bytes timed per case (sets repeats)")
    parser.add_argument("--most", type=int, default=7, help="at most this many timed calls per case")
    parser.add_argument("--output", required=True)
    return parser.parse_args()


def push_pull_together(arrays, names):
    handles = [bps.push_pull_async(a, n, average=False) for a, n in zip(arrays, names)]
    return [bps.synchronize(h) for h in handles]


def check(results, expected):
    for got in results:
        if got[0] != expected or got[-1] != expected:
            raise AssertionError(f"wrong sum: got {got[0]}, {got[-1]}, expected {expected}")


def time_case(label, sizes, rank, args):
    arrays = [np.full(max(1, s // 4), float(rank + 1), np.float32) for s in sizes]
    names = [f"{label}/{i}" for i in range(len(sizes))]
    total = sum(a.nbytes for a in arrays)
    check(push_pull_together(arrays, names), sum(range(1, bps.size() + 1)))
    repeats = repeats_for(total, int(args.budget_mb * (1 << 20)), most=args.most)
    return {"bytes": total, "tensors": len(sizes), "repeats": repeats,
            "bps_core": summary(time_calls(lambda: push_pull_together(arrays, names), repeats))}


def main():
    args = parse_args()
    bps.init()
    rank = bps.rank()
    rows = []
    for nbytes in (int(s) for s in args.sizes.split(",") if s):
        rows.append(dict(time_case(f"single/{nbytes}", [nbytes], rank, args), case="single"))
    for spec in (s for s in args.tensor_sets.split(",") if s):
        name, _, sizes = spec.partition("=")
        rows.append(dict(time_case(f"set/{name}", [int(b) for b in sizes.split("+")], rank, args), case=name))
        if rank == 0:
            print(f"set {name}: {rows[-1]['bps_core']['median_s'] * 1e3:.1f} ms", flush=True)
    bps.barrier()
    if rank == 0:
        for row in rows:
            print(f"{row['case']} {row['bytes']} B: {row['bps_core']['median_s'] * 1e3:.2f} ms", flush=True)
        with open(args.output, "w") as out:
            json.dump({"workers": bps.size(), "results": rows}, out, indent=1)
    bps.shutdown()


if __name__ == "__main__":
    main()
