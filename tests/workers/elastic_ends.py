"""How an elastic job ends. Usage: elastic_ends.py MODE STEPS LOG_DIR.

Every worker push_pulls one tensor a step, commits, and appends "<time> <step> <size>" to LOG_DIR/steps.<worker
id> (testing.elastic_jobs.ElasticJob.steps).
finish: every worker runs STEPS steps and finishes; at exit, after it left the job, it waits a second and
prints "worker <id>: exited after the job" (bpslaunch must not cut that off).
fail-on-reset: the reset callback raises AttributeError (as a Keras 2 `optimizer.lr` does under Keras 3):
once a worker is lost, every survivor fails with an uncaught exception."""

import atexit
import os
import sys
import time
from pathlib import Path

import numpy as np

import bps_tf.numpy as bps
from bps_tf.elastic import ObjectState
from bps_tf.elastic.generations import run_fn


def at_exit(worker_id):
    time.sleep(1)
    print(f"worker {worker_id}: exited after the job", flush=True)


def main():
    mode, steps, log_dir = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    worker_id = os.environ["DMLC_WORKER_ID"]
    if mode == "finish":
        atexit.register(at_exit, worker_id)  # before init(): it runs after bps_tf left the job
    bps.init()
    state = ObjectState(step=0)
    if mode == "fail-on-reset":
        state.register_reset_callbacks([lambda: state.optimizer.lr])

    @run_fn
    def train(state):
        while state.step < steps:
            bps.push_pull(np.ones(1000, np.float32), "gradient", average=False)
            state.step += 1
            with open(log_dir / f"steps.{worker_id}", "a") as log:
                log.write(f"{time.time():.3f} {state.step} {bps.size()}\n")
            time.sleep(0.02)
            state.commit()

    train(state)
    bps.shutdown()


if __name__ == "__main__":
    main()
