"""A worker killed (SIGKILL) while the job reduces GPU tensors: the other fails within seconds with an error
naming the lost worker, instead of waiting. Worker 1 kills itself after a few steps; worker 0 prints
`killed worker named` when its error names worker 1. Run as a job of 2 worker machines."""

import os
import signal
import sys
import time

import tensorflow as tf

GPUS = tf.config.list_physical_devices("GPU")

import bps_tf.tensorflow as hvd  # noqa: E402


def main():
    hvd.init()
    rank = hvd.rank()
    tf.config.set_visible_devices(GPUS[rank % len(GPUS)], "GPU")
    with tf.device("/GPU:0"):
        tensor = tf.ones([1 << 20])
    step = 0
    last = time.monotonic()
    while True:
        if rank == 1 and step == 20:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            hvd.allreduce(tensor, op=hvd.Sum, name="gpu.until_killed").numpy()
        except Exception as error:  # the expected failure
            seconds = time.monotonic() - last
            named = "worker 1" in str(error)
            print(f"rank {rank}: failed after {seconds:.2f} s: {type(error).__name__}: {error}", flush=True)
            if named and seconds < 10:
                print(f"rank {rank}: killed worker named", flush=True)
            sys.exit(0 if named else 1)
        last = time.monotonic()
        step += 1


if __name__ == "__main__":
    main()
