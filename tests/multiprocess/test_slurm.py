"""bps_tf jobs submitted to a real SLURM cluster (slurmctld, two slurmd, munge; tests/multiprocess/conftest.py)
with the sbatch example as users submit it; only the cluster-sized resources are overridden on the command line."""

import os
import re

import pytest

from testing.jobs import REPO_ROOT, WORKERS_DIR, clean_env

EXAMPLE = REPO_ROOT / "examples" / "slurm" / "bps_tf.sbatch"
# The example asks for 4 nodes of 8 GPUs and 64 CPUs: this cluster has 2 nodes without GPUs.
SMALL_CLUSTER = ["--nodes=2", "--gpus-per-node=0", "--cpus-per-task=1", "--time=10"]


def submit(cluster, *args):
    env = clean_env(PATH=f"{REPO_ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}", TF_CPP_MIN_LOG_LEVEL=2)
    job = cluster.submit(EXAMPLE, *args, options=SMALL_CLUSTER, env=env, cwd=REPO_ROOT)
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
