"""Asynchronous and bounded-staleness training across real processes (bpslaunch --local, loopback, TCP): the
servers hold the weights; nothing a worker pushes is lost; no worker leads the slowest by more than
BYTEPS_STALENESS steps; bad settings stop every process at start; checkpoints resume; an elastic job loses a
worker and takes it back."""

import json
import re
import secrets
import signal
import subprocess
import sys

import pytest

from testing.elastic_jobs import ElasticJob
from testing.jobs import BPSLAUNCH, WORKERS_DIR, assert_job_ok, clean_env, free_port, run_local


@pytest.mark.timeout(300)
def test_servers_weights_are_the_initial_ones_plus_every_pushed_change():
    result = run_local("async_sums.py", 3, 2, BYTEPS_ENABLE_ASYNC=1, BYTEPS_PARTITION_BYTES=2_000_000)
    assert_job_ok(result, 3, "async sums exact")
    digests = set(re.findall(r"final weights ([0-9a-f]{16})", result.stdout))
    assert len(digests) == 1, result.stdout  # the same weights on every worker after the last pull


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", [{"BYTEPS_ENABLE_ASYNC": 1}, {"BYTEPS_STALENESS": 0}], ids=["async", "staleness-0"])
def test_a_gradient_tape_pushes_every_change_its_steps_made(mode):
    # Horovod's TF2 loop (broadcast after the first step); each change is pushed at the next gradient(), the
    # last by synchronize_weights().
    result = run_local("async_tape_sums.py", 3, 2, **mode)
    assert_job_ok(result, 3, "tape changes exact")
    assert len(set(re.findall(r"final weights ([0-9a-f]{16})", result.stdout))) == 1, result.stdout


@pytest.mark.timeout(120)
@pytest.mark.parametrize("variable,value,message", [
    ("BYTEPS_STALENESS", "-1", "BYTEPS_STALENESS='-1' is invalid: it must be a whole number of steps >= 0"),
    ("BYTEPS_STALENESS", "1.5", "BYTEPS_STALENESS='1.5' is invalid: it must be a whole number of steps >= 0"),
    ("BYTEPS_ENABLE_ASYNC", "yes", "BYTEPS_ENABLE_ASYNC='yes' is invalid: it must be 0 or 1"),
    ("BYTEPS_COMPRESSION", "topk:0.01", "BYTEPS_COMPRESSION='topk:0.01' is set for asynchronous training "
                                        "(BYTEPS_ENABLE_ASYNC), which does not offer gradient compression"),
])
def test_a_bad_setting_stops_every_role_at_start(tmp_path, variable, value, message):
    # Each process checks its own environment before it does anything else, whatever its role.
    job = dict(DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=free_port(), DMLC_NUM_WORKER=2, DMLC_NUM_SERVER=1,
               DMLC_WORKER_ID=0, DMLC_NODE_HOST="127.0.0.1", BYTEPS_JOB_SECRET=secrets.token_hex(16),
               BYTEPS_ENABLE_ASYNC=1)
    job[variable] = value
    for role in ("scheduler", "server", "worker"):
        command = [BPSLAUNCH, sys.executable, str(WORKERS_DIR / "async_sums.py")]
        result = subprocess.run(command, env=clean_env(DMLC_ROLE=role, **job), capture_output=True, text=True,
                                timeout=60)
        assert result.returncode != 0, role
        assert message in result.stderr, f"{role}: {result.stderr[-2000:]}"


@pytest.mark.timeout(120)
def test_bpslaunch_refuses_a_negative_staleness(tmp_path):
    result = subprocess.run([BPSLAUNCH, "--local", "--staleness", "-2", "--", sys.executable, "-c", "pass"],
                            env=clean_env(), capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "--staleness must be a whole number of steps >= 0" in result.stderr, result.stderr


def slowest_started_before(slow_steps, moment):
    """How many pushes the slow worker had started by `moment`."""
    return sum(1 for s in slow_steps if s["started"] <= moment)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("staleness", [0, 2])
def test_no_worker_leads_the_slowest_by_more_than_the_staleness(tmp_path, staleness):
    workers = 3
    result = run_local("async_staleness.py", workers, 1, BYTEPS_STALENESS=staleness, ASYNC_DIR=tmp_path)
    assert_job_ok(result, workers, "20 steps")
    logs = [json.loads((tmp_path / f"steps.{r}.json").read_text()) for r in range(workers)]
    slow = logs[-1]
    lead_seen = 0
    for rank, steps in enumerate(logs[:-1]):
        for s in steps:
            # The reply to step k lets this worker start step k + 1: the slowest must have pushed k - s by then.
            started = slowest_started_before(slow, s["replied"])
            assert s["step"] - started <= staleness, (rank, s, started)
            lead_seen = max(lead_seen, s["step"] - slowest_started_before(slow, s["started"]))
    # The fast workers did run ahead as far as they were allowed (5 times faster, they would go further).
    assert lead_seen >= staleness, lead_seen
    total = sum(range(1, workers + 1))
    if staleness == 0:
        # Lock-step: every worker gets the same weights at every step, every worker's change in them.
        for steps in logs:
            assert [s["value"] for s in steps] == [total * s["step"] for s in steps], steps


def final_results(result, how, mode, workers):
    """Each worker's final line: rank -> (training loss, test accuracy, weights' fingerprint)."""
    found = re.findall(rf"rank (\d+): {how} {mode} loss ([0-9.]+) accuracy ([0-9.]+) weights ([0-9a-f]+)",
                       result.stdout)
    assert len(found) == workers, result.stdout[-4000:]
    return {int(rank): (float(loss), float(accuracy), weights) for rank, loss, accuracy, weights in found}


# How much higher than synchronous training's an asynchronous run's final training loss may be (below).
ASYNC_LOSS_BOUND = 1.2


def assert_trained_as_well(sync, asynchronous, how, workers):
    """Both runs start from the same weights. Compared by the final loss on the whole training set: the test
    accuracy moves by whole images (0.28 points each) and, asynchronously, with the order the workers' changes
    happen to reach the servers in (0.947 to 0.967 between runs, against 0.961 synchronously). Measured over
    runs of each script (15 epochs): the asynchronous loss was at most 1.07 times the synchronous one, where
    a third of the steps fewer costs 1.37 times (async_keras.py) and 1.29 times (async_strategy.py)."""
    sync_loss = final_results(sync, how, "sync", workers)[0][0]
    async_results = final_results(asynchronous, how, "async", workers)
    # After the last pull every worker holds the servers' weights.
    assert len({weights for _, _, weights in async_results.values()}) == 1, async_results
    assert async_results[0][0] <= ASYNC_LOSS_BOUND * sync_loss, (async_results, sync_loss)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("how,keras_env,mode", [
    ("fit", {}, {"BYTEPS_ENABLE_ASYNC": 1}), ("loop", {}, {"BYTEPS_ENABLE_ASYNC": 1}),
    ("fit", {"TF_USE_LEGACY_KERAS": 1}, {"BYTEPS_ENABLE_ASYNC": 1}), ("tape", {}, {"BYTEPS_ENABLE_ASYNC": 1}),
    ("tape", {}, {"BYTEPS_STALENESS": 2})], ids=["fit", "loop", "fit-tf-keras", "tape", "tape-staleness-2"])
def test_keras_trains_asynchronously_as_well_as_synchronously(how, keras_env, mode):
    workers = 3
    sync = run_local("async_keras.py", workers, 1, how, **keras_env)
    assert sync.returncode == 0, sync.stdout[-4000:] + sync.stderr[-4000:]
    asynchronous = run_local("async_keras.py", workers, 1, how, **mode, **keras_env)
    assert asynchronous.returncode == 0, asynchronous.stdout[-4000:] + asynchronous.stderr[-4000:]
    assert_trained_as_well(sync, asynchronous, how, workers)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("how,mode", [("fit", {"BYTEPS_ENABLE_ASYNC": 1}), ("loop", {"BYTEPS_ENABLE_ASYNC": 1}),
                                      ("fit", {"BYTEPS_STALENESS": 2})], ids=["fit", "loop", "fit-staleness-2"])
def test_bytepsstrategy_trains_asynchronously_as_well_as_synchronously(how, mode):
    workers = 3
    sync = run_local("async_strategy.py", workers, 1, how)
    assert sync.returncode == 0, sync.stdout[-4000:] + sync.stderr[-4000:]
    asynchronous = run_local("async_strategy.py", workers, 1, how, **mode)
    assert asynchronous.returncode == 0, asynchronous.stdout[-4000:] + asynchronous.stderr[-4000:]
    assert_trained_as_well(sync, asynchronous, f"strategy-{how}", workers)


@pytest.mark.timeout(300)
def test_an_optimizer_that_updates_a_variable_twice_a_step_trains_asynchronously():
    """AdamW's weight decay and its step each update every variable: both changes are pushed, one after the
    other, under the variable's one name."""
    result = run_local("async_strategy.py", 3, 1, "fit", BYTEPS_ENABLE_ASYNC=1, OPTIMIZER="adamw",
                       LEARNING_RATE=0.01, EPOCHS=10)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    results = final_results(result, "strategy-fit", "async", 3)
    assert len({weights for _, _, weights in results.values()}) == 1, results
    assert results[0][1] >= 0.9, results  # the test accuracy


@pytest.mark.timeout(120)
def test_a_held_push_fails_within_the_timeout_naming_the_slowest_worker():
    result = run_local("async_stall.py", 3, 1, BYTEPS_STALENESS=0, BYTEPS_TIMEOUT=4, timeout=60)
    assert result.returncode != 0
    for rank in (0, 1):
        failed = re.search(rf"rank {rank}: held push failed after ([0-9.]+) s: (.*)", result.stdout)
        assert failed, result.stdout[-4000:]
        assert f"worker {rank} is more than BYTEPS_STALENESS=0 steps ahead of the slowest worker, worker 2" \
            in failed.group(2), failed.group(2)
        assert "BYTEPS_TIMEOUT=4" in failed.group(2), failed.group(2)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", [{"BYTEPS_ENABLE_ASYNC": 1}, {"BYTEPS_STALENESS": 100}], ids=["async", "staleness"])
def test_keras_fit_does_not_wait_for_a_straggler(mode):
    # Worker 2's steps take 0.2 s more than the others'. 3 epochs of 10 steps: the others finish while it has
    # taken few of its steps (no collective at each step or epoch binds them to it).
    result = run_local("async_straggler_fit.py", 3, 1, SLOW_RANK=2, SLOW_SECONDS=0.2, **mode)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    ends = {int(rank): json.loads(times) for rank, times in re.findall(r"rank (\d): steps (\[.*\])", result.stdout)}
    assert sorted(ends) == [0, 1, 2] and all(len(t) == 30 for t in ends.values()), result.stdout[-4000:]
    others_done = max(ends[0][-1], ends[1][-1])
    straggler_steps_by_then = sum(1 for t in ends[2] if t <= others_done)
    assert straggler_steps_by_then < 15, (straggler_steps_by_then, ends)


@pytest.mark.timeout(600)
def test_a_checkpoint_of_asynchronous_training_resumes_with_its_weights(tmp_path):
    path = tmp_path / "async.weights.h5"
    trained = run_local("async_checkpoint.py", 3, 1, "train", path, BYTEPS_ENABLE_ASYNC=1)
    assert trained.returncode == 0, trained.stdout[-4000:] + trained.stderr[-4000:]
    saved = set(re.findall(r"rank \d: saved ([0-9a-f]+)", trained.stdout))
    assert len(saved) == 1, trained.stdout[-4000:]
    # A new job: its servers start empty; every worker loads the checkpoint, and the servers' copy must be the
    # checkpoint's (not the new job's initial weights plus each worker's change to it).
    # Loaded before any step, or after one (then the load's assignment is pushed as worker 0's change).
    for phase in ("resume", "resume_after_a_step"):
        resumed = run_local("async_checkpoint.py", 3, 1, phase, path, BYTEPS_ENABLE_ASYNC=1)
        assert resumed.returncode == 0, phase + resumed.stdout[-4000:] + resumed.stderr[-4000:]
        assert len(set(re.findall(r"rank \d: resumed ([0-9a-f]+)", resumed.stdout))) == 1, resumed.stdout[-4000:]
        assert len(set(re.findall(r"rank \d: trained on ([0-9a-f]+)", resumed.stdout))) == 1, resumed.stdout[-4000:]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("api", ["hvd", "strategy"])
def test_an_asynchronous_elastic_job_goes_on_without_a_killed_worker_and_takes_it_back(api):
    """kill -9 of one of 3 asynchronous workers mid-epoch: the two others step again within 5 s, the killed one
    is started again and rejoins (its first pushes and the survivors' initialise the servers of the new
    generation; none is made before the state is synchronised), and after a last step that changes nothing
    every worker holds the servers' weights, trained as well as synchronous training. Compared by the loss on
    the whole training set, as the other asynchronous tests (assert_trained_as_well): the test accuracy moves
    by whole images and with the order in which the workers' changes reach the servers (with the Horovod API
    0.972-0.989 over 27 such runs, once 0.953, against 0.978 synchronously), while the loss stayed at
    0.064-0.076 (each worker steps on its own batch), under the strategy 0.156-0.157, against 0.150."""
    with ElasticJob("elastic_keras.py", [api, "{log_dir}", 20], workers=3, servers=1, min_workers=2, max_workers=3,
                    max_restarts=1, TF_USE_LEGACY_KERAS=0, BYTEPS_ENABLE_ASYNC=1) as job:
        job.wait_for_step(1, lambda s: s[1] == 3 and 3 <= s[2] <= 8)
        killed_at = job.signal(1, signal.SIGKILL)
        for survivor in (0, 2):
            step = job.wait_for_step(survivor, lambda s: s[0] > killed_at, timeout=60)
            assert step[0] - killed_at < 5, (step, killed_at, job.output()[-4000:])
        job.wait_for_step(0, lambda s: s[0] > killed_at and s[3] == 3, timeout=120)  # the restarted one is in
        code, out = job.wait(timeout=200)
    assert code == 0, out[-6000:]
    ends = re.findall(r"rank (\d): weights (\w+) accuracy ([0-9.]+) epochs (\d+) size (\d) loss ([0-9.]+)", out)
    assert sorted(int(e[0]) for e in ends) == [0, 1, 2], out[-4000:]
    assert len({e[1] for e in ends}) == 1, f"weights differ: {ends}"
    reference = float(re.search(r"rank 0: uninterrupted accuracy [0-9.]+ loss ([0-9.]+)", out).group(1))
    assert float(ends[0][5]) <= ASYNC_LOSS_BOUND * reference, (ends, reference)
