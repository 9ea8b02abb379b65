"""A worker that only push_pulls one float32 tensor a few times through bps_tf's NumPy API (no TensorFlow):
the load for benchmarks/link_trace.py. Usage: python -m benchmarks.workers.numpy_push_pull BYTES ROUNDS"""

import sys

import numpy as np

import bps_tf.numpy as bps


def main():
    nbytes, rounds = int(sys.argv[1]), int(sys.argv[2])
    bps.init()
    array = np.ones(nbytes // 4, np.float32)
    for _ in range(rounds):
        bps.push_pull(array, "trace", average=False)
    bps.shutdown()


if __name__ == "__main__":
    main()
