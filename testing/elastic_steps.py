"""What the workers of elastic tests write for the test that watches them (testing.elastic_jobs.ElasticJob.steps):
each completed step as a line "<time> <numbers...> <size>" in LOG_DIR/steps.<worker id>. While the job has fewer
workers than it started with, each step also waits, so that a worker started again (TensorFlow takes seconds
to start on a busy machine) is back in the job well before the training ends."""

import os
import time
from pathlib import Path

from bps_tf.process import size as job_size

# Each step's wait with every worker in the job, and while one is missing.
FULL_PAUSE_S = 0.01
SHORT_PAUSE_S = 0.5


def _steps_path(log_dir, worker_id):
    return Path(log_dir) / f"steps.{worker_id}"


def log_step(log_dir, *numbers, first_workers=3):
    """Appends "<time> <numbers> <size>" to LOG_DIR/steps.<DMLC_WORKER_ID>, then waits (see above)."""
    size = job_size()
    with open(_steps_path(log_dir, os.environ["DMLC_WORKER_ID"]), "a") as log:
        log.write(" ".join([f"{time.time():.3f}", *(str(int(n)) for n in numbers), str(size)]) + "\n")
    time.sleep(SHORT_PAUSE_S if size < first_workers else FULL_PAUSE_S)


def wait_until_the_others_went_on(log_dir, first_workers=3, timeout=120):
    """In a worker started again (its place logged steps before), before init(): waits until another worker
    logged a step in a job without it. Survivors that are slow to form their next generation (seconds, on a
    busy machine) would otherwise take the restarted worker into it, and the job would never train short of
    a worker."""
    own = _steps_path(log_dir, os.environ["DMLC_WORKER_ID"])
    if not own.exists():
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in Path(log_dir).glob("steps.*"):
            if path != own and any(line.split()[-1:] and int(line.split()[-1]) < first_workers
                                   for line in path.read_text().split("\n")[:-1]):
                return
        time.sleep(0.1)
