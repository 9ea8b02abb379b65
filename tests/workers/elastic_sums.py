"""An elastic job on NumPy arrays (bps_tf.elastic, no TensorFlow): every step push_pulls a tensor of
every dtype and checks its sum exactly against the generation's workers, adds the float64 sum to a "model"
kept in the elastic state, and commits. Workers are killed and started again meanwhile; every worker must
end with the same model, and no sum may be wrong.

Usage: elastic_sums.py STEPS PID_DIR [STEP_SECONDS]. Each process writes its pid to PID_DIR/<worker id>.<pid>,
its step to PID_DIR/step.<worker id> ("<step> <size>") and appends each completed step to
PID_DIR/steps.<worker id> ("<time> <step> <size>"); at the end it prints "rank R: model <digest> after N steps
with S workers". SIGUSR1 prints its Python stack."""

import faulthandler
import hashlib
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np

import bps_tf.numpy as bps
from bps_tf.elastic import ObjectState
from bps_tf.elastic.generations import run_fn

DTYPES = ("float16", "bfloat16", "float32", "float64", "int32", "int64")
ELEMENTS = 20_000  # several partitions of 4 MB in all, on every server


def value(rank, step, dtype):
    """Small integers, exact in every dtype."""
    if dtype == "bfloat16":
        import ml_dtypes
        dtype = ml_dtypes.bfloat16
    return np.full(ELEMENTS, (rank + 1 + step) % 7, dtype=dtype)


def main():
    steps, pid_dir = int(sys.argv[1]), Path(sys.argv[2])
    step_seconds = float(sys.argv[3]) if len(sys.argv) > 3 else 0.02
    faulthandler.register(signal.SIGUSR1)  # a stuck worker shows where it is
    worker_id = os.environ.get("DMLC_WORKER_ID", "0")
    (pid_dir / f"{worker_id}.{os.getpid()}").touch()
    bps.init()
    state = ObjectState(step=0, model=np.zeros(ELEMENTS, np.float64))

    @run_fn
    def train(state):
        while state.step < steps:
            rank, size = bps.rank(), bps.size()
            expected = sum((r + 1 + state.step) % 7 for r in range(size))
            for dtype in DTYPES:
                total = bps.push_pull(value(rank, state.step, dtype), f"sums.{dtype}", average=False)
                if not np.all(total.astype(np.float64) == expected):
                    print(f"rank {rank}: WRONG SUM of {dtype} at step {state.step} with {size} workers: "
                          f"{np.unique(total.astype(np.float64))[:4]} != {expected}", flush=True)
                    sys.exit(3)
                if dtype == "float64":
                    state.model += total / size
            state.step += 1
            (pid_dir / f"step.{worker_id}").write_text(f"{state.step} {size}")
            with open(pid_dir / f"steps.{worker_id}", "a") as log:
                log.write(f"{time.time():.3f} {state.step} {size}\n")
            time.sleep(step_seconds)
            state.commit()

    train(state)
    digest = hashlib.sha256(state.model.tobytes()).hexdigest()[:16]
    print(f"rank {bps.rank()}: model {digest} after {state.step} steps with {bps.size()} workers", flush=True)
    bps.shutdown()


if __name__ == "__main__":
    main()
