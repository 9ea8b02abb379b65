"""Elastic jobs (docs/elastic.md) across real processes: workers killed, frozen, restarted and added while the
job trains, through bpslaunch --local --min-workers/--max-workers/--max-restarts."""

import re
import signal
import time

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
    with ElasticJob("elastic_keras.py", [api, "{log_dir}", 20], workers=3, servers=1, min_workers=2, max_workers=3,
                    max_restarts=1, TF_USE_LEGACY_KERAS=legacy_keras) as job:
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
