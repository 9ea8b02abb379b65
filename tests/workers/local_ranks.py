"""One process of a machine with several worker processes: prints its place in the job, checks it against the
core's view, and checks that a push_pull sums over every process of every machine."""

import json
import os

import numpy as np

import bps_tf.numpy as bps


def main():
    env = {name: os.environ.get(name) for name in ("DMLC_WORKER_ID", "BYTEPS_LOCAL_RANK", "BYTEPS_LOCAL_SIZE")}
    print("env", json.dumps(env), flush=True)
    bps.init()
    local_size = int(env["BYTEPS_LOCAL_SIZE"])
    assert bps.local_size() == local_size and bps.local_rank() == int(env["BYTEPS_LOCAL_RANK"])
    assert bps.rank() == int(env["DMLC_WORKER_ID"]) * local_size + bps.local_rank()
    assert bps.size() == int(os.environ["DMLC_NUM_WORKER"]) * local_size
    # Integers: the sum is exact whatever order the server adds in.
    got = bps.push_pull(np.arange(5, dtype=np.int64) * (bps.rank() + 1), "local_ranks/sum", average=False)
    np.testing.assert_array_equal(got, np.arange(5, dtype=np.int64) * sum(range(1, bps.size() + 1)))
    print(f"rank {bps.rank()} of {bps.size()}: sum exact", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
