"""bps_tf jobs submitted to a real SLURM cluster (slurmctld, two slurmd, munge; tests/multiprocess/conftest.py)
with the sbatch examples as users submit them; only the cluster-sized resources are overridden on the command
line."""

import os
import re
import signal
import tempfile
import time
from pathlib import Path

import pytest

from testing.elastic_jobs import processes_with
from testing.jobs import REPO_ROOT, WORKERS_DIR, clean_env
from testing.slurm import FINAL_STATES

EXAMPLE = REPO_ROOT / "examples" / "slurm" / "bps_tf.sbatch"
ELASTIC_EXAMPLE = REPO_ROOT / "examples" / "slurm" / "bps_tf_elastic.sbatch"
# The example asks for 4 nodes of 8 GPUs and 64 CPUs: this cluster has 2 nodes without GPUs.
SMALL_CLUSTER = ["--nodes=2", "--gpus-per-node=0", "--cpus-per-task=1", "--time=10"]


def job_env(**extra):
    return clean_env(PATH=f"{REPO_ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}", TF_CPP_MIN_LOG_LEVEL=2,
                     **extra)


def submit(cluster, *args):
    job = cluster.submit(EXAMPLE, *args, options=SMALL_CLUSTER, env=job_env(), cwd=REPO_ROOT)
    return cluster.wait(job, timeout=240), cluster.output(job)


@pytest.mark.timeout(300)
def test_the_sbatch_example_trains_the_same_model_on_both_nodes_and_completes(slurm_cluster):
    state, output = submit(slurm_cluster, "examples/keras_digits.py")
    assert state == "COMPLETED", output[-4000:]
    assert "this machine runs scheduler, 1 server(s), worker machine 0 (1 process(es)); scheduler at bpsnode0:" \
        in output, output[-4000:]
    assert "this machine runs 1 server(s), worker machine 1 (1 process(es))" in output, output[-4000:]
    reports = dict(re.findall(r"worker (\d): test accuracy [0-9.]+, model fingerprint (\w+)", output))
    assert sorted(reports) == ["0", "1"] and reports["0"] == reports["1"], output[-4000:]


@pytest.mark.timeout(300)
def test_a_failing_worker_fails_the_slurm_job_naming_the_worker_and_the_error(slurm_cluster):
    state, output = submit(slurm_cluster, str(WORKERS_DIR / "lifecycle.py"), "raise")
    assert state == "FAILED", output[-4000:]
    assert re.search(r"\[worker 1\] .*ValueError: boom in the training loop of worker 1", output), output[-4000:]
    assert "srun: error: bpsnode1: task 1: Exited with exit code" in output, output[-4000:]


def _latest_step(log_dir, worker_id):
    """(step, workers) that worker `worker_id` of tests/workers/elastic_sums.py completed last, or None."""
    try:
        step, size = (log_dir / f"step.{worker_id}").read_text().split()
        return int(step), int(size)
    except (OSError, ValueError):
        return None


def _wait_for(condition, what, cluster, job, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if cluster.state(job) in FINAL_STATES:
            break
        time.sleep(0.05)
    raise AssertionError(f"{what} not seen within {timeout} s; the job's output:\n{cluster.output(job)[-4000:]}")


def submit_elastic_until_step(cluster, log_dir, steps, step_seconds, step):
    """The elastic sbatch example training tests/workers/elastic_sums.py, once worker 1 is at `step`."""
    job = cluster.submit(ELASTIC_EXAMPLE, WORKERS_DIR / "elastic_sums.py", steps, log_dir, step_seconds,
                         options=SMALL_CLUSTER, env=job_env(MAX_RESTARTS=2), cwd=REPO_ROOT)
    try:
        _wait_for(lambda: (_latest_step(log_dir, 1) or (0, 0))[0] >= step, f"worker 1 at step {step}", cluster, job)
    except BaseException:
        cluster.command("scancel", str(job), check=False)
        raise
    return job


def assert_both_workers_ended_with_the_same_model(output, steps):
    """tests/workers/elastic_sums.py's final lines: both workers, every step, the same model."""
    ends = re.findall(r"\[worker (\d)\] rank (\d): model (\w+) after (\d+) steps with (\d) workers", output)
    assert sorted(end[0] for end in ends) == ["0", "1"], output[-4000:]
    assert len({end[2] for end in ends}) == 1, f"the models differ: {ends}"
    assert all(end[3] == str(steps) and end[4] == "2" for end in ends), ends
    return ends


@pytest.mark.timeout(300)
def test_an_elastic_job_goes_on_when_a_worker_step_is_cancelled_and_the_step_started_again_rejoins(slurm_cluster):
    """The elastic sbatch example: worker 1's step is cancelled (scancel JOB.STEP) mid-training; worker 0 goes
    on alone, the script starts the step again, the new worker 1 rejoins, both end with the same model and
    the job is COMPLETED."""
    steps, step_seconds = 300, 0.05
    with tempfile.TemporaryDirectory(prefix="bps_tf_slurm_elastic_") as folder:
        log_dir = Path(folder)
        job = submit_elastic_until_step(slurm_cluster, log_dir, steps, step_seconds, 20)
        try:
            slurm_cluster.command("scancel", slurm_cluster.wait_for_step(job, "worker-bpsnode1"))
            cancelled_at = _latest_step(log_dir, 0)[0]
            state = slurm_cluster.wait(job, timeout=200)
        except BaseException:
            slurm_cluster.command("scancel", str(job), check=False)
            raise
        output = slurm_cluster.output(job)
        worker_1_processes = [path for path in log_dir.iterdir() if path.name.startswith("1.")]
    assert state == "COMPLETED", output[-4000:]
    assert re.search(r"STEP \d+\.\d+ ON bpsnode1 CANCELLED", output), output[-4000:]
    assert "bps_tf_elastic: the worker on bpsnode1 failed; starting it again (restart 1 of 2)" in output, output[-4000:]
    assert len(worker_1_processes) == 2, (worker_1_processes, output[-4000:])
    # Worker 0 went on alone, then with the restarted worker 1 (bps_tf.elastic reports each change).
    changes = re.findall(r"\[worker 0\] bps_tf\.elastic: the job's workers changed: generation (\d+) has (\d+) workers",
                         output)
    assert changes == [("2", "1"), ("3", "2")], output[-4000:]
    ends = assert_both_workers_ended_with_the_same_model(output, steps)
    print(f"worker 1's step cancelled at worker 0's step {cancelled_at} of {steps}; it rejoined and both ended "
          f"with model {ends[0][2]}")


@pytest.mark.timeout(300)
def test_an_elastic_job_goes_on_when_its_scheduler_is_killed_and_started_again_in_its_step(slurm_cluster):
    """The elastic sbatch example: kill -9 of the scheduler process in the step of the scheduler and servers;
    that step's bpslaunch starts it again, the servers and workers register again with it, both workers end
    with the same model and the job is COMPLETED."""
    steps, step_seconds = 300, 0.05
    with tempfile.TemporaryDirectory(prefix="bps_tf_slurm_elastic_") as folder:
        log_dir = Path(folder)
        job = submit_elastic_until_step(slurm_cluster, log_dir, steps, step_seconds, 20)
        try:
            schedulers = [pid for pid, env in processes_with("bps_tf.launcher.role").items()
                          if env.get("DMLC_ROLE") == "scheduler" and env.get("SLURM_JOB_ID") == str(job)]
            assert len(schedulers) == 1, schedulers
            os.kill(schedulers[0], signal.SIGKILL)
            state = slurm_cluster.wait(job, timeout=200)
        except BaseException:
            slurm_cluster.command("scancel", str(job), check=False)
            raise
        output = slurm_cluster.output(job)
    assert state == "COMPLETED", output[-4000:]
    assert "scheduler was killed by SIGKILL; starting it again (restart 1 of 2)" in output, output[-4000:]
    assert re.search(r"the job goes on with this scheduler: generation 2 forms from the 2 worker\(s\)", output), \
        output[-4000:]
    assert_both_workers_ended_with_the_same_model(output, steps)


@pytest.mark.timeout(300)
def test_an_elastic_job_whose_scheduler_and_servers_step_is_lost_fails(slurm_cluster):
    """The step of the scheduler and servers is where the job keeps them: cancelling it (as losing its first
    node would) ends the job within seconds, FAILED, although its workers could go on."""
    with tempfile.TemporaryDirectory(prefix="bps_tf_slurm_elastic_") as folder:
        log_dir = Path(folder)
        job = submit_elastic_until_step(slurm_cluster, log_dir, 300, 0.05, 10)
        try:
            slurm_cluster.command("scancel", slurm_cluster.wait_for_step(job, "servers"))
            lost_at = time.monotonic()
            state = slurm_cluster.wait(job, timeout=120)
            took = time.monotonic() - lost_at
        except BaseException:
            slurm_cluster.command("scancel", str(job), check=False)
            raise
        output = slurm_cluster.output(job)
        last_steps = [_latest_step(log_dir, worker) for worker in (0, 1)]
    assert state == "FAILED", output[-4000:]
    assert took < 60, (took, output[-4000:])
    assert all(step[0] < 300 for step in last_steps), last_steps
    print(f"the job ended {state} {took:.1f} s after its scheduler's step was cancelled, at steps {last_steps}")
