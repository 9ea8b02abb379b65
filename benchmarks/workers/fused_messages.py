"""A worker of benchmarks/fused_messages.py: the BERT-like model's gradients (all, or only those under 256 KB)
pushed through the NumPy API, every step's tensors started at once in backprop order; prints one JSON line
with its messages to and from the servers per step and the step time."""

import json
import sys
import time

import numpy as np

import bps_tf.numpy as bps
from benchmarks.lib.step_model_fit import bert_like_tensors

SMALL_BYTES = 262144  # the planner's group by default (PartitionPlanner::kMinGroupBytes)


def main(which, steps):
    bps.init()
    sizes = [b // 4 for b in bert_like_tensors(layers=12) if which == "all" or b < SMALL_BYTES]
    arrays = [np.ones(n, np.float32) for n in sizes]

    def step():
        handles = [bps.push_pull_async(arrays[i], f"g{i}", average=False, priority=-i)
                   for i in reversed(range(len(arrays)))]
        for handle in handles:
            assert np.all(bps.synchronize(handle) == bps.size())

    step()  # the declarations
    before, began = bps.communication_counters(), time.perf_counter()
    for _ in range(steps):
        step()
    seconds, after = time.perf_counter() - began, bps.communication_counters()
    print(json.dumps({"rank": bps.rank(), "tensors": len(sizes), "bytes": 4 * sum(sizes),
                      "messages_sent": (after["messages_sent"] - before["messages_sent"]) / steps,
                      "messages_received": (after["messages_received"] - before["messages_received"]) / steps,
                      "step_ms": seconds / steps * 1000}), flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
