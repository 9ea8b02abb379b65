"""Elastic jobs (docs/elastic.md) across real processes: workers killed, frozen, restarted and added while the
job trains, through bpslaunch --local --min-workers/--max-workers/--max-restarts."""

import os
import re
import signal
import time
from pathlib import Path

import pytest

from testing.elastic_jobs import ElasticJob, open_files, resident_kib

SURVIVORS_NEXT_STEP_S = 5


def final_lines(output, pattern):
    return re.findall(pattern, output)


def assert_survivors_went_on(job, killed_at, survivors):
    """Every survivor completed a step within SURVIVORS_NEXT_STEP_S of the kill; returns the slowest's delay."""
    delays = []
    for worker in survivors:
        step = job.wait_for_step(worker, lambda s: s[0] > killed_at, timeout=60)
        delays.append(step[0] - killed_at)
    assert max(delays) < SURVIVORS_NEXT_STEP_S, f"survivors' next steps {delays} s after the kill\n{job.output()[-4000:]}"
    return max(delays)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("api", ["hvd", "strategy"])
@pytest.mark.parametrize("legacy_keras", [0, 1], ids=["keras3", "tf_keras"])
def test_a_worker_killed_mid_epoch_rejoins_and_every_worker_ends_alike(api, legacy_keras):
    """kill -9 of one of 3 workers in the middle of an epoch: the other two complete a step within 5 s, the
    killed one is started again and rejoins, every worker ends with the same weights, and the test accuracy
    is within a point of the same training uninterrupted."""
    # The survivors take one step, then wait for the restarted worker: the job's steps with two workers are
    # the same few however long it takes to start (they move the accuracy).
    with ElasticJob("elastic_keras.py", [api, "{log_dir}", 20, "await_rejoin_after_a_step"], workers=3, servers=1,
                    min_workers=2, max_workers=3, max_restarts=1, TF_USE_LEGACY_KERAS=legacy_keras) as job:
        job.wait_for_step(1, lambda s: s[1] == 3 and 3 <= s[2] <= 8)  # epoch 3, mid-way
        killed_at = job.signal(1, signal.SIGKILL)
        delay = assert_survivors_went_on(job, killed_at, [0, 2])
        job.wait_for_step(0, lambda s: s[0] > killed_at and s[3] == 3, timeout=120)  # the restarted one is in
        code, out = job.wait(timeout=200)
    assert code == 0, out[-6000:]
    assert "worker 1 was killed by SIGKILL; starting it again" in out, out[-4000:]
    ends = final_lines(out, r"rank (\d): weights (\w+) accuracy ([0-9.]+) epochs (\d+) size (\d)")
    assert sorted(int(e[0]) for e in ends) == [0, 1, 2], out[-4000:]
    assert len({e[1] for e in ends}) == 1, f"weights differ: {ends}"
    assert all(e[3] == "20" and e[4] == "3" for e in ends), ends
    reference = float(re.search(r"rank 0: uninterrupted accuracy ([0-9.]+)", out).group(1))
    assert abs(float(ends[0][2]) - reference) <= 0.01, (ends, reference)
    print(f"{api}, keras {'2' if legacy_keras else '3'}: survivors' next step {delay:.2f} s after the kill; "
          f"accuracy {ends[0][2]} against {reference:.4f} uninterrupted")


@pytest.mark.timeout(300)
def test_survivors_slow_to_report_ready_form_their_generation_without_the_restarted_worker():
    """The survivors of a kill report that they are ready only once the killed worker, restarted, has
    registered again: their generation forms without it (2 workers) and steps at once, and the restarted
    worker is taken in at their next commit. Had it been taken in with them, their synchronisation would
    wait for it to build its model."""
    with ElasticJob("elastic_keras.py", ["strategy", "{log_dir}", 12, "hold"], workers=3, servers=1, min_workers=2,
                    max_workers=3, max_restarts=1, BYTEPS_LOG_LEVEL="INFO") as job:  # the scheduler says who waits
        job.wait_for_step(1, lambda s: s[1] == 1 and s[2] >= 3)
        killed_at = job.signal(1, signal.SIGKILL)
        deadline = time.monotonic() + 120
        while job.output().count("waits to join at the next generation") == 0:
            assert time.monotonic() < deadline, f"the restarted worker never registered\n{job.output()[-4000:]}"
            time.sleep(0.05)
        released_at = time.time()
        (job.log_dir / "release").touch()
        for survivor in (0, 2):
            step = job.wait_for_step(survivor, lambda s: s[0] > released_at, timeout=60)
            assert step[3] == 2, f"the survivors' generation took the restarted worker in: {step}"
            assert step[0] - released_at < SURVIVORS_NEXT_STEP_S, (step, released_at, job.output()[-4000:])
        job.wait_for_step(0, lambda s: s[0] > released_at and s[3] == 3, timeout=120)
        code, out = job.wait(timeout=200)
    assert code == 0, out[-6000:]
    ends = final_lines(out, r"rank (\d): weights (\w+) accuracy ([0-9.]+) epochs (\d+) size (\d)")
    assert sorted(int(e[0]) for e in ends) == [0, 1, 2], out[-4000:]
    assert len({e[1] for e in ends}) == 1, f"weights differ: {ends}"


# tests/workers/elastic_sums.py: NumPy push_pulls of every dtype, each sum checked exactly against the
# generation's workers, a commit every step; every worker prints its model's digest at the end.
SUMS_END = r"\[worker (\d)\] rank (\d): model (\w+) after (\d+) steps with (\d) workers"
EXTRA_END = r"rank (\d): model (\w+) after (\d+) steps with (\d) workers"


def sums_ends(out):
    return [(int(w), int(r), model, int(steps), int(size)) for w, r, model, steps, size in final_lines(out, SUMS_END)]


def wait_for_exit(pid, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                return
        except OSError:
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} still runs after {timeout} s")


FROZEN_TIMEOUT_S = 6


@pytest.mark.timeout(240)
def test_a_frozen_worker_is_removed_after_the_timeout_rejoins_when_woken_and_is_turned_away_if_replaced():
    """SIGSTOP of one of 3 workers (BYTEPS_TIMEOUT=6): the other two go on as a job of 2 once the timeout
    passed; SIGCONT: the frozen one learns that it left, joins again at the next commit and the job is 3
    again. Frozen a second time and replaced meanwhile by a new worker of its id, woken it is turned away
    saying why, and the job goes on. No sum is ever wrong and every worker ends with the same model."""
    steps = 450
    with ElasticJob("elastic_sums.py", [steps, "{log_dir}", 0.05], workers=3, servers=1, min_workers=2, max_workers=3,
                    BYTEPS_TIMEOUT=FROZEN_TIMEOUT_S) as job:
        for worker in range(3):
            job.wait_for_step(worker, lambda s: s[1] >= 20, timeout=60)
        frozen_at = job.signal(1, signal.SIGSTOP)
        alone = job.wait_for_step(0, lambda s: s[0] > frozen_at and s[2] == 2, timeout=30)
        removed_after = alone[0] - frozen_at
        assert removed_after < FROZEN_TIMEOUT_S + 3, removed_after
        for worker in (0, 2):  # they go on as a job of 2
            job.wait_for_step(worker, lambda s, a=alone: s[1] >= a[1] + 10 and s[2] == 2, timeout=30)

        woken_at = job.signal(1, signal.SIGCONT)
        back = [job.wait_for_step(w, lambda s: s[0] > woken_at and s[2] == 3, timeout=30) for w in range(3)]
        rejoined_after = max(b[0] for b in back) - woken_at

        frozen_pid = job.workers()[1]
        refrozen_at = job.signal(1, signal.SIGSTOP)
        job.wait_for_step(0, lambda s: s[0] > refrozen_at and s[2] == 2, timeout=30)
        replaced_at = time.time()
        job.start_worker(1)
        job.wait_for_step(0, lambda s: s[0] > replaced_at and s[2] == 3, timeout=60)
        os.kill(frozen_pid, signal.SIGCONT)
        wait_for_exit(frozen_pid, timeout=30)
        code, out = job.wait(timeout=120)
        replacement = job.extra_output(1)
    assert "WRONG SUM" not in out + replacement, out[-4000:]
    assert re.search(r"\[scheduler\] .*generation \d+ broke: worker 1 \(.*\) exited or lost its connection \(no sign "
                     rf"of life from .* for {FROZEN_TIMEOUT_S} s \(BYTEPS_TIMEOUT\): the process is frozen or the "
                     r"network is cut\)", out), out[-4000:]
    assert re.search(r"\[worker 1\] .*this worker left the job \(.*\); joining it again", out), out[-4000:]
    assert re.search(r"\[worker 1\] RuntimeError: this worker was removed from the elastic job \(.*\) and cannot join "
                     r"it again: two workers registered with DMLC_WORKER_ID=1 .* a worker's id is free again once "
                     r"it left the job\.", out), out[-4000:]
    ends = sums_ends(out)
    extra = [(1, int(r), model, int(n), int(size)) for r, model, n, size in final_lines(replacement, EXTRA_END)]
    assert sorted(e[0] for e in ends + extra) == [0, 1, 2], (out[-4000:], replacement[-2000:])
    assert len({e[2] for e in ends + extra}) == 1, f"the models differ: {ends + extra}"
    assert all(e[3] == steps and e[4] == 3 for e in ends + extra), ends + extra
    assert code == 0, out[-4000:]
    print(f"frozen: the others went on alone {removed_after:.2f} s after SIGSTOP (BYTEPS_TIMEOUT="
          f"{FROZEN_TIMEOUT_S}); woken, it was back {rejoined_after:.2f} s after SIGCONT")


CHURN_KILLS = 10


@pytest.mark.timeout(300)
def test_ten_kills_and_restarts_never_hang_leak_or_give_a_wrong_sum():
    """Workers 1 and 2 of 3 are killed in turn, 10 times in all, each started again by bpslaunch and back in
    the job before the next kill: every rejoin comes within seconds, the scheduler's and servers' memory and
    open files do not grow, no sum of any dtype is ever wrong and every worker ends with the same model."""
    steps = 1200
    with ElasticJob("elastic_sums.py", [steps, "{log_dir}", 0.02], workers=3, servers=2, min_workers=2, max_workers=3,
                    max_restarts=CHURN_KILLS // 2) as job:
        for worker in range(3):
            job.wait_for_step(worker, lambda s: s[1] >= 10, timeout=60)
        services = job.role_pids("scheduler") + job.role_pids("server")
        assert len(services) == 3, services
        samples, rejoins = [], []
        for kill in range(CHURN_KILLS):
            victim = 1 + kill % 2
            killed_at = job.signal(victim, signal.SIGKILL)
            job.wait_for_step(0, lambda s: s[0] > killed_at and s[2] == 2, timeout=30)
            back = job.wait_for_step(victim, lambda s: s[0] > killed_at and s[2] == 3, timeout=60)
            rejoins.append(back[0] - killed_at)
            for worker in range(3):  # a few steps together before the next kill
                job.wait_for_step(worker, lambda s: s[0] > back[0] + 0.3 and s[2] == 3, timeout=30)
            samples.append([(resident_kib(pid), open_files(pid)) for pid in services])
        code, out = job.wait(timeout=180)
    assert "WRONG SUM" not in out, out[-4000:]
    assert code == 0, out[-4000:]
    for victim in (1, 2):
        assert f"worker {victim} was killed by SIGKILL; starting it again (restart {CHURN_KILLS // 2} of " \
               f"{CHURN_KILLS // 2})" in out, out[-4000:]
    ends = sums_ends(out)
    assert sorted(e[0] for e in ends) == [0, 1, 2], out[-4000:]
    assert len({e[2] for e in ends}) == 1, f"the models differ: {ends}"
    assert all(e[3] == steps and e[4] == 3 for e in ends), ends
    first, last = samples[0], samples[-1]
    for (kib_first, files_first), (kib_last, files_last) in zip(first, last):
        assert kib_last - kib_first < 8 * 1024, samples  # memory: less than 8 MiB more after 9 more rejoins
        assert files_last - files_first <= 2, samples
    print(f"{CHURN_KILLS} kills: each worker back in {min(rejoins):.2f} to {max(rejoins):.2f} s; scheduler and "
          f"servers (KiB, open files) after the first rejoin {first}, after the last {last}")


@pytest.mark.timeout(180)
def test_workers_started_beyond_the_first_join_at_the_next_commit_up_to_the_maximum():
    """A job of 2 workers (--max-workers 3): a third worker started later joins at the next commit and the
    job goes on as 3; a fourth is turned away at once, saying the job's maximum, and the job goes on."""
    steps = 400
    with ElasticJob("elastic_sums.py", [steps, "{log_dir}", 0.05], workers=2, servers=1, min_workers=2,
                    max_workers=3) as job:
        for worker in range(2):
            job.wait_for_step(worker, lambda s: s[1] >= 20, timeout=60)
        started_at = time.time()
        job.start_worker(2)
        joined = [job.wait_for_step(w, lambda s: s[0] > started_at and s[2] == 3, timeout=60) for w in range(3)]
        joined_after = max(j[0] for j in joined) - started_at
        refused_at = time.monotonic()
        beyond = job.start_worker(3)
        refused = beyond.wait(timeout=60)
        refused_after = time.monotonic() - refused_at
        after = time.time()
        for worker in range(3):  # the job goes on as 3
            job.wait_for_step(worker, lambda s: s[0] > after and s[2] == 3, timeout=30)
        code, out = job.wait(timeout=120)
        grown, turned_away = job.extra_output(2), job.extra_output(3)
    assert refused != 0 and refused_after < 10, (refused, refused_after)
    assert "DMLC_WORKER_ID='3' is invalid: it must be an integer in [0, BYTEPS_MAX_WORKERS=3)" in turned_away, \
        turned_away[-2000:]
    assert "WRONG SUM" not in out + grown, out[-4000:]
    assert code == 0, out[-4000:]
    ends = sums_ends(out) + [(2, int(r), model, int(n), int(size))
                             for r, model, n, size in final_lines(grown, EXTRA_END)]
    assert sorted(e[0] for e in ends) == [0, 1, 2], (out[-4000:], grown[-2000:])
    assert len({e[2] for e in ends}) == 1, f"the models differ: {ends}"
    assert all(e[3] == steps and e[4] == 3 for e in ends), ends
    print(f"a third worker was in the job {joined_after:.2f} s after it started; a fourth was turned away in "
          f"{refused_after:.2f} s")


ELASTIC_TIMEOUT_S = 5


@pytest.mark.timeout(180)
def test_below_the_minimum_every_remaining_worker_fails_within_the_elastic_timeout_saying_why():
    """Two of 4 workers are killed in a job of at least 3 (BYTEPS_ELASTIC_TIMEOUT=5, no restarts): the
    scheduler waits 5 s for workers to join, then the job fails, each of the 2 remaining workers with an
    error naming the minimum and how many are left."""
    with ElasticJob("elastic_sums.py", [100000, "{log_dir}", 0.05], workers=4, servers=1, min_workers=3,
                    max_workers=4, BYTEPS_ELASTIC_TIMEOUT=ELASTIC_TIMEOUT_S) as job:
        for worker in range(4):
            job.wait_for_step(worker, lambda s: s[1] >= 10, timeout=60)
        killed_at = time.monotonic()
        job.signal(2, signal.SIGKILL)
        job.signal(3, signal.SIGKILL)
        code, out = job.wait(timeout=60)
        failed_after = time.monotonic() - killed_at
    assert code != 0, out[-4000:]
    assert ELASTIC_TIMEOUT_S <= failed_after < ELASTIC_TIMEOUT_S + 5, (failed_after, out[-4000:])
    why = (f"the job needs at least BYTEPS_MIN_WORKERS=3 workers (bpslaunch --min-workers), but 2 are left and no "
           f"worker joined within BYTEPS_ELASTIC_TIMEOUT={ELASTIC_TIMEOUT_S} s")
    for worker in (0, 1):
        assert f"[worker {worker}] RuntimeError: {why}" in out, out[-4000:]
    assert "WRONG SUM" not in out, out[-4000:]
    print(f"below the minimum: the job failed {failed_after:.2f} s after the kills (BYTEPS_ELASTIC_TIMEOUT="
          f"{ELASTIC_TIMEOUT_S})")


# tests/workers/elastic_ends.py: how a job ends, well or failed.


@pytest.mark.timeout(120)
def test_when_every_survivor_fails_the_job_fails_naming_the_last_worker_and_its_error():
    """One of 3 workers is killed and the reset callback of both survivors raises AttributeError: every worker
    of the job failed or was lost, so the job fails (it does not end well): the scheduler names the last
    worker that failed and its exception, and exits 1, and so does bpslaunch."""
    with ElasticJob("elastic_ends.py", ["fail-on-reset", 100000, "{log_dir}"], workers=3, servers=1, min_workers=1,
                    max_workers=3) as job:
        for worker in range(3):
            job.wait_for_step(worker, lambda s: s[1] >= 5, timeout=60)
        job.signal(2, signal.SIGKILL)
        code, out = job.wait(timeout=60)
    assert code == 1, out[-4000:]
    assert re.search(r"\[scheduler\] .*aborting the job: every worker of the job failed or was lost; the last: worker "
                     r"[01] \(.*\) failed: uncaught AttributeError: 'ObjectState' object has no attribute 'optimizer'",
                     out), out[-4000:]
    assert "bpslaunch: scheduler exited with code 1; stopping all processes" in out, out[-4000:]
    assert "the job ended before" not in out, out[-4000:]


@pytest.mark.timeout(120)
def test_a_job_whose_workers_finish_exits_0_once_they_exited_on_their_own():
    """Both workers finish: bpslaunch waits for them to exit (their code at exit runs to its end after the
    scheduler ended the job), exits 0 and says nothing of workers that never joined."""
    with ElasticJob("elastic_ends.py", ["finish", 20, "{log_dir}"], workers=2, servers=1, min_workers=1,
                    max_workers=2) as job:
        code, out = job.wait(timeout=60)
    assert code == 0, out[-4000:]
    assert "joined it" not in out, out[-4000:]
    for worker in (0, 1):
        assert f"[worker {worker}] worker {worker}: exited after the job" in out, out[-4000:]


@pytest.mark.timeout(400)
def test_a_global_batch_that_stops_dividing_evenly_trains_through_4_3_4_workers():
    """BytePSStrategy with a global batch of 32: 8 per worker on 4 workers; one killed, the 3 left split each
    batch 11, 11, 10 and train on (Keras builds the model again at the new fit from each worker's own
    batch); the restarted worker rejoins (4 again; the survivors wait for it from epoch 2 on, so that they
    cannot finish first however slowly it starts). Every worker ends with the same weights, and the test
    accuracy is at most a point below the same training uninterrupted."""
    with ElasticJob("elastic_keras.py", ["strategy", "{log_dir}", 8, "global_batch=32", "await_rejoin"], workers=4,
                    servers=1, min_workers=3, max_workers=4, max_restarts=1) as job:
        job.wait_for_step(3, lambda s: s[1] == 1 and s[2] >= 5)
        killed_at = job.signal(3, signal.SIGKILL)
        job.wait_for_step(0, lambda s: s[0] > killed_at and s[3] == 3, timeout=120)  # 3 workers stepped
        job.wait_for_step(0, lambda s: s[0] > killed_at and s[3] == 4, timeout=180)  # and 4 again
        code, out = job.wait(timeout=240)
    assert code == 0, out[-6000:]
    ends = final_lines(out, r"rank (\d): weights (\w+) accuracy ([0-9.]+) epochs (\d+) size (\d)")
    assert sorted(int(e[0]) for e in ends) == [0, 1, 2, 3], out[-4000:]
    assert len({e[1] for e in ends}) == 1, f"weights differ: {ends}"
    assert all(e[3] == "8" and e[4] == "4" for e in ends), ends
    reference = float(re.search(r"rank 0: uninterrupted accuracy ([0-9.]+)", out).group(1))
    # After the reset each worker's data iterator starts again, so this is another trajectory than the
    # uninterrupted one (8 epochs on 360 test examples: either may lead by a point or so); it must train as well.
    assert float(ends[0][2]) >= reference - 0.01, (ends, reference)
