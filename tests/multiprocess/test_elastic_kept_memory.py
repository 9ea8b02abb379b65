"""The memory of a failed push_pull in place in an elastic job (bps_tf.numpy.communication_counters()'s
bytes_kept_after_failure): held while a server on the host may still write into it, let go once the next
generation formed with the same servers (their resets drained every round of the broken one)."""

import os
import signal
import time

import pytest

from testing.elastic_jobs import ElasticJob

TENSOR_BYTES = 8 << 20


def wait_for_file(path, job, timeout=120):
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} not written within {timeout} s\n{job.output()[-4000:]}"
        time.sleep(0.05)


def kept_at_failure(lines, worker):
    """The bytes kept when the worker's push_pull failed, and its log lines after that."""
    failed = [line for line in lines if line.startswith("failed")]
    assert len(failed) == 1, (worker, lines)
    return int(failed[0].split()[1]), lines[lines.index(failed[0]) + 1:]


def logs(job, workers):
    return {w: (job.log_dir / f"kept.{w}").read_text().split("\n")[:-1] for w in workers}


@pytest.mark.timeout(240)
def test_a_failed_push_in_place_keeps_its_memory_until_the_next_generation_formed():
    """Worker 2 of 3 is killed while the others' pushes wait at the server in place: they keep their tensors
    (input and, unless TensorFlow forwarded it, output) and let them go in the next generation."""
    with ElasticJob("elastic_kept_after_failure.py", [3, "{log_dir}"], workers=3, servers=1, min_workers=2,
                    max_workers=3) as job:
        for survivor in (0, 1):
            wait_for_file(job.log_dir / f"pushing.{survivor}", job)
        time.sleep(1)  # their pushes reach the server, in place, and wait there for worker 2's
        job.signal(2, signal.SIGKILL)
        job.wait(timeout=180)
        survivors = logs(job, (0, 1))
    for worker, lines in survivors.items():
        kept, after = kept_at_failure(lines, worker)
        assert kept in (TENSOR_BYTES, 2 * TENSOR_BYTES), (worker, lines)
        assert after and after[0] == "step 1 size 2 kept 0", (worker, lines)
        assert after[-1] == "done 0", (worker, lines)


@pytest.mark.timeout(240)
def test_after_a_lost_server_the_memory_of_a_failed_push_in_place_stays():
    """A server of 2 is killed while worker 0's pushes wait there in place: that server may have been
    stopped mid-write rather than dead, so worker 0 keeps its tensors to the end."""
    with ElasticJob("elastic_kept_after_failure.py", [3, "{log_dir}"], workers=2, servers=2, min_workers=2,
                    max_workers=2, max_restarts=1) as job:
        wait_for_file(job.log_dir / "pushing.0", job)
        time.sleep(1)
        os.kill(job.role_pids("server")[1], signal.SIGKILL)
        (job.log_dir / "go").touch()  # worker 1 goes on, into the generation that broke
        job.wait(timeout=180)  # (bpslaunch may report the killed server once the workers are done)
        lines = logs(job, (0,))[0]
    kept, after = kept_at_failure(lines, 0)
    assert kept in (TENSOR_BYTES, 2 * TENSOR_BYTES), lines
    assert after and after[0] == f"step 1 size 2 kept {kept}", lines
    assert after[-1] == f"done {kept}", lines
