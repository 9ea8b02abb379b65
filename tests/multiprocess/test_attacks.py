"""A running job against strangers and lying members (docs/security.md): raw garbage, wrong secrets, random
and mutated frames with and without a valid proof, misconfigured, late and foreign processes. No process of
the job dies, every sum stays exact, and each turned-away process is told why."""

import random
import subprocess
import sys
import time

import pytest

from testing.attacks import fuzz, hold_strangers, member_handshake_seconds, still_open, wait_for_listeners
from testing.jobs import BPSLAUNCH, ManualJob, clean_env

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
