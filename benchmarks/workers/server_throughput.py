"""A worker of benchmarks/tcp_io_threads.py: push_pulls one float32 tensor of BYTES bytes ROUNDS times through
the NumPy API (after one untimed round), checks every sum, and prints one JSON line with the bytes it pushed
and the seconds that took."""

import json
import sys
import time

import numpy as np

import bps_tf.numpy as bps


def main(nbytes, rounds):
    bps.init()
    array = np.ones(nbytes // 4, np.float32)

    def round_trip():
        summed = bps.push_pull(array, "throughput", average=False)
        assert np.all(summed == bps.size()), "a sum came back wrong"

    round_trip()  # the declaration
    began = time.perf_counter()
    for _ in range(rounds):
        round_trip()
    seconds = time.perf_counter() - began
    print(json.dumps({"rank": bps.rank(), "bytes_pushed": nbytes * rounds, "seconds": seconds}), flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
