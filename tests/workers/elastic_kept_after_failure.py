"""The memory of a push_pull whose pushes went in place and then failed: kept while a server on this host may
still write a sum into it, let go once the next generation formed with the same servers.

An elastic job whose servers run on the workers' host. Each step push_pulls an 8 MB float32 tensor of
TensorFlow's own memory (in the heap the servers map: its pushes go in place). At step 1 the job's last worker
waits before pushing until PID_DIR/go exists, while the others' pushes wait at the servers: the test kills
that worker, or a server, and their push_pull fails when the generation breaks. Each worker appends to
PID_DIR/kept.<worker id> "step <step> size <workers> kept <bytes kept>" before each step, "failed <bytes
kept>" at a failure and "done <bytes kept>" at the end (the waiting worker gives up after 2 minutes), and
writes PID_DIR/pushing.<worker id> just before its push_pull of step 1.

Usage: elastic_kept_after_failure.py STEPS PID_DIR"""

import os
import sys
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

import bps_tf.numpy as bps_numpy
import bps_tf.tensorflow as bps
from bps_tf.elastic import ObjectState
from bps_tf.elastic.generations import run_fn

ELEMENTS = (8 << 20) // 4
GO_TIMEOUT_S = 120  # the test kills the waiting worker, or writes "go", within seconds


def kept_bytes():
    return bps_numpy.communication_counters()["bytes_kept_after_failure"]


def main():
    steps, pid_dir = int(sys.argv[1]), Path(sys.argv[2])
    worker_id = os.environ["DMLC_WORKER_ID"]
    waits = int(worker_id) == int(os.environ["DMLC_NUM_WORKER"]) - 1
    log = pid_dir / f"kept.{worker_id}"
    bps.init()
    state = ObjectState(step=0)

    def note(line):
        with open(log, "a") as out:
            out.write(line + "\n")

    @run_fn
    def train(state):
        while state.step < steps:
            size = bps.size()
            note(f"step {state.step} size {size} kept {kept_bytes()}")
            if state.step == 1:
                deadline = time.monotonic() + GO_TIMEOUT_S
                while waits and not (pid_dir / "go").exists():
                    if time.monotonic() > deadline:
                        sys.exit(f"worker {worker_id}: no {pid_dir / 'go'} within {GO_TIMEOUT_S} s")
                    time.sleep(0.05)
                (pid_dir / f"pushing.{worker_id}").touch()
            x = tf.fill([ELEMENTS], float(bps.rank() + 1)) * 1  # TensorFlow's own memory
            try:
                total = bps.push_pull(x, name="kept.x", op=bps.Sum)
            except Exception:
                note(f"failed {kept_bytes()}")
                raise
            expected = size * (size + 1) / 2
            if not np.all(total.numpy() == expected):
                note(f"WRONG SUM at step {state.step}")
                sys.exit(3)
            state.step += 1
            state.commit()

    train(state)
    note(f"done {kept_bytes()}")
    bps.shutdown()


if __name__ == "__main__":
    main()
