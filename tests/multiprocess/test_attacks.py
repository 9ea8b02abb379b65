"""A running job against strangers and lying members (docs/security.md): raw garbage, wrong secrets, random
and mutated frames with and without a valid proof, misconfigured, late and foreign processes. No process of
the job dies, every sum stays exact, and each turned-away process is told why. Strangers holding every place
for unproven connections delay neither a job's start nor a restarted worker's return to an elastic job."""

import random
import re
import signal
import subprocess
import sys
import time

import pytest

from testing.attacks import (Strangers, fuzz, hold_strangers, member_handshake_seconds, still_open,
                             wait_for_listeners, wait_for_ports)
from testing.elastic_jobs import ElasticJob
from testing.jobs import BPSLAUNCH, ManualJob, clean_env, free_port

FUZZ_SECONDS = 12
STRANGERS = 1000  # per port, held open at once
HANDSHAKE_DEADLINE_S = 3  # the transport's, for connections that prove nothing


def run_bpslaunch(env, *command, timeout=60):
    return subprocess.run([BPSLAUNCH, *command], env=clean_env(**env), capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.timeout(240)
def test_a_running_job_survives_strangers_garbage_and_lying_members(tmp_path):
    stop = tmp_path / "stop"
    begun = time.monotonic()
    with ManualJob(2, 2, "steady_sums.py", stop, BYTEPS_TIMEOUT=60) as job:
        ports = wait_for_listeners(job, ["scheduler", "server0", "server1"])
        secret = job.base["BYTEPS_JOB_SECRET"]
        layout = {k: v for k, v in job.base.items() if k.startswith("DMLC_") or k == "BYTEPS_TIMEOUT"}

        # Processes that must be turned away, each told why; the job goes on.
        print(f"job up after {time.monotonic() - begun:.1f} s")
        foreign = run_bpslaunch(dict(layout, DMLC_ROLE="server", BYTEPS_JOB_SECRET="another job's secret, long"))
        assert foreign.returncode != 0 and "job secret" in foreign.stderr, foreign.stderr
        joining = [sys.executable, "-c", "import bps_tf.numpy as b; b.init()"]
        wrong_size = run_bpslaunch(dict(layout, DMLC_ROLE="worker", DMLC_WORKER_ID=0, DMLC_NUM_WORKER=3,
                                        BYTEPS_JOB_SECRET=secret), *joining)
        assert wrong_size.returncode != 0 and "DMLC_NUM_WORKER=3" in wrong_size.stderr, wrong_size.stderr
        late = run_bpslaunch(dict(layout, DMLC_ROLE="worker", DMLC_WORKER_ID=1, BYTEPS_JOB_SECRET=secret), *joining)
        assert late.returncode != 0 and "after the job started" in late.stderr, late.stderr
        second_scheduler = run_bpslaunch(dict(layout, DMLC_ROLE="scheduler", BYTEPS_JOB_SECRET="another job's one"))
        assert second_scheduler.returncode != 0 and "cannot listen" in second_scheduler.stderr, second_scheduler.stderr
        print(f"misconfigured processes turned away after {time.monotonic() - begun:.1f} s")

        started = time.monotonic()
        cases = fuzz(list(ports.values()), secret, FUZZ_SECONDS, random.Random(2024))
        print(f"{cases} fuzz cases in {time.monotonic() - started:.1f} s")
        for name in ("scheduler", "server0", "server1", "worker0", "worker1"):
            assert job.processes[name].poll() is None, f"{name} died during the fuzz"

        # Strangers holding many connections open: each is closed within the handshake deadline, and a member
        # still gets in within 2 s at every port meanwhile.
        targets = [ports["scheduler"], ports["server0"]]
        strangers = hold_strangers(targets, 2 * STRANGERS)
        held_at = time.monotonic()
        for port in targets:
            seconds = member_handshake_seconds(port, secret)
            assert seconds < 2, f"a member needed {seconds:.1f} s to connect past {STRANGERS} strangers"
        time.sleep(max(0.0, held_at + HANDSHAKE_DEADLINE_S + 1.5 - time.monotonic()))
        left_open = still_open(strangers)
        for sock in strangers:
            sock.close()
        assert left_open == 0, f"{left_open} of {len(strangers)} strangers' connections still open"
        print(f"{len(strangers)} strangers closed within {HANDSHAKE_DEADLINE_S + 1.5} s")

        stop.touch()
        for w in range(2):
            code, out = job.wait(f"worker{w}", timeout=60)
            assert code == 0, out[-3000:]
            assert f"rank {w}: " in out and "steps exact" in out, out[-3000:]
            assert "WRONG SUM" not in out
        for name in ("scheduler", "server0", "server1"):
            code, out = job.wait(name, timeout=30)
            assert code == 0, out[-3000:]
    assert cases > 100


ADMISSION_DEADLINE_S = 2
# What a listener logs when every place for unproven connections is taken.
FULL = r"places for connections that have not yet proven the job's secret are taken"


def new_process_start(job, worker_id, old_pid, timeout=30):
    """When the process of place `worker_id` other than `old_pid` called bps_tf.init(): tests/workers/elastic_sums.py
    touches PID_DIR/<worker id>.<pid> just before (time.time())."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        started = [f for f in job.log_dir.glob(f"{worker_id}.*") if f.name != f"{worker_id}.{old_pid}"]
        if started:
            return started[0].stat().st_mtime
        time.sleep(0.01)
    raise AssertionError(f"worker {worker_id} was not started again within {timeout} s\n{job.output()[-4000:]}")


@pytest.mark.timeout(120)
def test_a_restarted_worker_is_admitted_within_2_s_while_strangers_hold_every_place():
    """An elastic job of 2 workers: 1000 strangers at the scheduler's port and 1000 at the server's (silent,
    one byte, garbage), each connection opened again as soon as the job closes it, so that they take every
    place for unproven connections all the time. Worker 1 is killed and started again by bpslaunch: from its
    bps_tf.init()'s start (before it connects to the scheduler) to its first completed step in the job (after
    init() returned: admitted, connected to the server; then the state's sync and one step) less than 2 s
    pass. Both workers end with the same model and every sum exact."""
    steps = 200
    with ElasticJob("elastic_sums.py", [steps, "{log_dir}", 0.05], workers=2, servers=1, min_workers=1,
                    max_workers=2, max_restarts=1, BYTEPS_TIMEOUT=30) as job:
        for worker in range(2):
            job.wait_for_step(worker, lambda s: s[1] >= 5, timeout=60)
        ports = wait_for_ports({"scheduler": job.role_pids("scheduler")[0], "server": job.role_pids("server")[0]})
        assert ports["scheduler"] == int(job.port()), ports
        with Strangers(list(ports.values()), 2 * STRANGERS) as strangers:
            strangers.wait_until_each_was_open()
            time.sleep(0.5)
            old_pid = job.workers()[1]
            closed_before = strangers.closed
            killed_at = job.signal(1, signal.SIGKILL)
            init_started = new_process_start(job, 1, old_pid)
            first = job.wait_for_step(1, lambda s: s[0] > init_started, timeout=30)
            closed_meanwhile = strangers.closed - closed_before
            holding = strangers.holding()
        admitted_after = first[0] - init_started
        code, out = job.wait(timeout=60)
    assert "WRONG SUM" not in out, out[-4000:]
    assert code == 0, out[-4000:]
    assert "worker 1 was killed by SIGKILL; starting it again" in out, out[-4000:]
    for role in ("scheduler", "server 0"):  # every place was taken: each said so
        assert re.search(rf"\[{role}\] .*{FULL}", out), out[-4000:]
    ends = re.findall(r"\[worker (\d)\] rank \d: model (\w+) after (\d+) steps with (\d) workers", out)
    assert sorted(e[0] for e in ends) == ["0", "1"] and len({e[1] for e in ends}) == 1, ends
    assert all(e[2] == str(steps) and e[3] == "2" for e in ends), ends
    assert first[2] == 2, first
    assert admitted_after < ADMISSION_DEADLINE_S, (
        f"the restarted worker's first step came {admitted_after:.2f} s after its init() began, past "
        f"{STRANGERS} strangers at each port")
    print(f"restarted worker: init() began {init_started - killed_at:.2f} s after the kill, its first step in the "
          f"job {admitted_after:.2f} s later; meanwhile the job closed {closed_meanwhile} strangers' connections "
          f"({closed_meanwhile / (first[0] - killed_at):.0f}/s), {holding} of {2 * STRANGERS} open at the end")


def seconds_until_every_worker_joined(job, since, timeout=60):
    """From `since` (time.monotonic()) until every worker of `job` (tests/workers/steady_sums.py) printed that
    its init() returned."""
    deadline = since + timeout
    while time.monotonic() < deadline:
        if all(": joined" in job.output(f"worker{w}") for w in range(job.workers)):
            return time.monotonic() - since
        if any(job.processes[f"worker{w}"].poll() is not None for w in range(job.workers)):
            break
        time.sleep(0.02)
    raise AssertionError(f"the job did not come up within {timeout} s, or a worker failed\n{job.outputs()}")


def job_up_seconds(strangers, port, stop):
    """A job of 2 workers and 1 server at scheduler port `port`: seconds from its servers' and workers' start
    (once the scheduler listens and each of `strangers`' connections was made) until every worker's init()
    returned."""
    marks = {}

    def strangers_first(job):
        wait_for_listeners(job, ["scheduler"])
        strangers.wait_until_each_was_open()
        marks["started"] = time.monotonic()

    with ManualJob(2, 1, "steady_sums.py", stop, before_the_others=strangers_first, DMLC_PS_ROOT_PORT=port,
                   BYTEPS_TIMEOUT=30) as job:
        up = seconds_until_every_worker_joined(job, marks["started"])
        stop.touch()
        for w in range(2):
            code, out = job.wait(f"worker{w}", timeout=60)
            assert code == 0 and "steps exact" in out, out[-3000:]
        scheduler = job.output("scheduler")
    return up, scheduler


JOB_UP_MARGIN_S = 2


@pytest.mark.timeout(120)
def test_strangers_holding_the_schedulers_port_before_the_job_starts_do_not_delay_it(tmp_path):
    """1000 strangers connect to the scheduler's port from before the job starts (tried again until it listens)
    and say nothing; each connection the scheduler closes is opened again at once. The servers and workers
    start once each of them was made: every worker's init() returns within 2 s of the time the same job takes
    without strangers."""
    times = {}
    for count in (0, STRANGERS):
        port = free_port()
        with Strangers([port], count, sends=[Strangers.IDLE]) as strangers:
            times[count], scheduler = job_up_seconds(strangers, port, tmp_path / f"stop{count}")
            closed = strangers.closed
        if count:
            assert re.search(FULL, scheduler), scheduler[-3000:]  # every place was taken
    assert times[STRANGERS] < times[0] + JOB_UP_MARGIN_S, times
    print(f"job up {times[0]:.2f} s after its servers and workers started without strangers, {times[STRANGERS]:.2f} s "
          f"with {STRANGERS} (the scheduler closed {closed} of their connections)")
