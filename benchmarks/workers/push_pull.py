"""One worker of the push_pull microbenchmark (started by benchmarks/push_pull_loopback.py or
push_pull_cluster.py).

For each size, the same tensor (float32, or --dtype) is summed over all workers by bps_tf (the TensorFlow op,
and the NumPy API underneath it) and by TensorFlow's RING all-reduce (MultiWorkerMirroredStrategy), in this
same process, one after the other, so both see the same machine at the same moment; or, with --methods, by
one of them only (a job whose processes run with the malloc that method's users get). Rank 0 writes the JSON.
"""

import argparse
import json
import os

import numpy as np

from benchmarks.lib import tf_ring
from benchmarks.lib.measure import repeats_for, summary, time_calls


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", required=True, help="comma-separated tensor sizes in bytes")
    parser.add_argument("--tf-cluster", required=True, help="host:port of each worker's TF server, in rank order")
    parser.add_argument("--output", required=True, help="JSON file written by rank 0")
    parser.add_argument("--budget-mb", type=float, default=512, help="bytes timed per size and method (sets repeats)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16"],
                        help="the tensors' dtype (16-bit floats are summed in float32 by the servers)")
    parser.add_argument("--threads", type=int, default=0, help="TF intra/inter-op threads (0: TF's default)")
    parser.add_argument("--methods", default="all", choices=["all", "bps", "ring"],
                        help="bps_tf's and the ring's (all), bps_tf's only (bps_tf, bps_core) or the ring's only")
    return parser.parse_args()


def check_sum(result, size, value_of_rank):
    expected = sum(value_of_rank(r) for r in range(size))
    got = np.asarray(result).reshape(-1)
    if got[0] != expected or got[-1] != expected:
        raise AssertionError(f"wrong sum: got {got[0]}, {got[-1]}, expected {expected}")


def main():
    args = parse_args()
    rank = int(os.environ.get("DMLC_WORKER_ID", "0"))
    cluster = args.tf_cluster.split(",")
    import tensorflow as tf

    # Threads and TF's collectives must be configured before TensorFlow runs anything (bps_tf's core is
    # independent of TensorFlow's runtime).
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    ours, ring = args.methods in ("all", "bps"), args.methods in ("all", "ring")
    strategy = tf_ring.ring_strategy(cluster, rank) if ring else None
    import bps_tf.numpy as bps_numpy
    import bps_tf.tensorflow as bps

    bps.init()
    assert bps.rank() == rank and bps.size() == len(cluster), "TF cluster and bps_tf job disagree"
    size = bps.size()
    all_reduce = tf_ring.ring_all_reduce(strategy) if ring else None
    value_of_rank = lambda r: float(r + 1)  # small integers: every method's sum is exact in every dtype

    dtype = tf.as_dtype(args.dtype)
    rows = []
    for nbytes in (int(s) for s in args.sizes.split(",")):
        array = np.full(nbytes // dtype.size, value_of_rank(rank), dtype.as_numpy_dtype)
        # Made by TensorFlow, in its own memory, as gradients are (a constant may share the array's).
        tensor = tf.fill([nbytes // dtype.size], tf.constant(value_of_rank(rank), dtype))
        repeats = repeats_for(nbytes, int(args.budget_mb * (1 << 20)))
        row = {"bytes": nbytes, "repeats": repeats}
        if ours:
            check_sum(bps.push_pull(tensor, name=f"tf/{nbytes}", op=bps.Sum), size, value_of_rank)
            check_sum(bps_numpy.push_pull(array, f"core/{nbytes}", average=False), size, value_of_rank)
            row["bps_tf"] = summary(time_calls(lambda: bps.push_pull(tensor, name=f"tf/{nbytes}", op=bps.Sum),
                                               repeats))
            row["bps_core"] = summary(time_calls(lambda: bps_numpy.push_pull(array, f"core/{nbytes}",
                                                                             average=False), repeats))
        if ring:
            check_sum(all_reduce(tensor), size, value_of_rank)
            row["tf_ring"] = summary(time_calls(lambda: all_reduce(tensor), repeats))
        rows.append(row)
        if rank == 0:
            timed = ", ".join(f"{name} {row[name]['median_s'] * 1e3:.2f} ms"
                              for name in ("bps_tf", "bps_core", "tf_ring") if name in row)
            print(f"{nbytes} B: {timed}", flush=True)
    # Every worker leaves bps_tf only when all are done, so no TF server goes away under a running ring.
    bps.shutdown()
    if rank == 0:
        with open(args.output, "w") as out:
            json.dump({"workers": size, "dtype": args.dtype, "results": rows}, out, indent=1)


if __name__ == "__main__":
    main()
