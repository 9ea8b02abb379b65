"""push_pull across real processes on loopback, started through bpslaunch: over bps_tf's own authenticated TCP
transport (the default), and over UCX (BYTEPS_TRANSPORT=ucx, the RDMA path) where a test says so."""

import re
import subprocess
import sys
import time

import pytest

from testing.jobs import ManualJob, assert_job_ok, clean_env, run_local



@pytest.mark.timeout(300)
@pytest.mark.parametrize("workers,servers", [(1, 1), (3, 2)])  # 2 workers: the shared-memory tests below
def test_every_dtype_and_size_sums_exactly(workers, servers):
    result = run_local("sums.py", workers, servers)
    assert_job_ok(result, workers, "42 dtype/size cases exact")
    # One host: every worker maps every server's shared memory, and tensors go through it.
    assert_job_ok(result, workers, f"{servers} server arenas mapped")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("without_shared_memory", ["all", "worker 1"])
def test_sums_exact_with_shared_memory_off_for_some_or_all_workers(without_shared_memory):
    env = {"BYTEPS_SHARED_MEMORY": 0} if without_shared_memory == "all" else {"NO_SHARED_MEMORY_WORKER": 1}
    result = run_local("sums.py", 2, 2, **env)
    assert_job_ok(result, 2, "42 dtype/size cases exact")
    assert f"[worker 1] rank 1: 0 server arenas mapped" in result.stdout, result.stdout
    mapped_by_worker_0 = 0 if without_shared_memory == "all" else 2
    assert f"[worker 0] rank 0: {mapped_by_worker_0} server arenas mapped" in result.stdout, result.stdout


@pytest.mark.timeout(300)
@pytest.mark.parametrize("in_place_off", ["none", "worker 1", "all"])
def test_large_tensorflow_tensors_are_summed_in_place_exactly(in_place_off):
    env = {"IN_PLACE_OFF_WORKER": 1} if in_place_off == "worker 1" else {}
    if in_place_off == "all":
        env["BYTEPS_IN_PLACE_PUSHES"] = 0
    result = run_local("in_place_sums.py", 2, 1, **env)
    assert_job_ok(result, 2, "15 in-place cases exact")
    for w in range(2):
        expected = "no" if in_place_off == "all" or (in_place_off == "worker 1" and w == 1) else "yes"
        assert f"[worker {w}] rank {w}: pushed in place {expected}" in result.stdout, result.stdout[-3000:]


@pytest.mark.timeout(300)
def test_hundreds_in_flight_and_many_rounds():
    result = run_local("inflight.py", 3, 2, BYTEPS_PARTITION_BYTES=65536)
    assert_job_ok(result, 3, "200 in flight and 100 rounds exact")


@pytest.mark.timeout(300)
def test_every_byte_over_sockets_spread_over_tcp_io_threads():
    # 3 workers and 2 servers without shared memory: each server's connections (3 workers, the scheduler) and
    # each worker's (2 servers, the scheduler) spread over 3 I/O threads, whatever the machine's default.
    result = run_local("inflight.py", 3, 2, BYTEPS_PARTITION_BYTES=65536, BYTEPS_SHARED_MEMORY=0,
                       BYTEPS_TCP_IO_THREADS=3)
    assert_job_ok(result, 3, "200 in flight and 100 rounds exact")


@pytest.mark.timeout(300)
def test_small_partitions_and_tight_credit():
    result = run_local("inflight.py", 2, 2, BYTEPS_PARTITION_BYTES=4096, BYTEPS_SCHEDULING_CREDIT=8192)
    assert_job_ok(result, 2, "200 in flight and 100 rounds exact")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("shared_memory,transport", [(0, "tcp"), (1, "tcp"), (0, "ucx")])
def test_many_small_tensors_sum_exactly_fused_into_fewer_messages(shared_memory, transport):
    # Without shared memory the small partitions to one server travel fused (PUSH_MANY): each worker sends at
    # most one message per partition, and gets one reply per message. With it they go through the arenas.
    # UCX may receive several fused payloads from one peer at once (rendezvous).
    result = run_local("small_tensors.py", 2, 2, BYTEPS_SHARED_MEMORY=shared_memory, BYTEPS_TRANSPORT=transport)
    assert_job_ok(result, 2, "small tensors exact")
    print("\n".join(line for line in result.stdout.splitlines() if "messages sent" in line))


@pytest.mark.timeout(300)
def test_mismatched_shape_or_dtype_is_an_error_on_every_worker():
    result = run_local("mismatch.py", 2, 1)
    assert_job_ok(result, 2, "job still works")
    for w in range(2):
        caught = [line for line in result.stdout.splitlines() if line.startswith(f"[worker {w}] rank {w} caught")]
        assert len(caught) == 3, result.stdout
        assert "'shape-mismatch'" in caught[0] and "float32[3,4]" in caught[0] and "float32[3,5]" in caught[0]
        assert "'dtype-mismatch'" in caught[1] and "float64[8]" in caught[1]
        assert "two different tensors" in caught[2]


def failure_report(output):
    match = re.search(r"failed after ([0-9.]+) s: (\w+): (.*)", output)
    assert match, output
    return float(match.group(1)), match.group(2), match.group(3)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("transport", ["tcp", "ucx"])
def test_killed_server_is_an_error_on_every_worker_within_the_timeout(transport):
    env = {"BYTEPS_TIMEOUT": 20, "BYTEPS_TRANSPORT": transport}
    with ManualJob(2, 2, "loop_until_failure.py", **env) as job:
        time.sleep(3)  # both workers are now looping over push_pull
        job.kill("server1")
        for w in range(2):
            code, out = job.wait(f"worker{w}", timeout=60)
            assert code == 7, out
            seconds, kind, message = failure_report(out)
            assert seconds < 20, job.outputs()
            assert "server" in message, out


@pytest.mark.timeout(120)
def test_killed_worker_is_an_error_on_the_others():
    with ManualJob(3, 1, "loop_until_failure.py", BYTEPS_TIMEOUT=20) as job:
        time.sleep(3)
        job.kill("worker2")
        for w in range(2):
            code, out = job.wait(f"worker{w}", timeout=60)
            assert code == 7, out
            seconds, _, message = failure_report(out)
            assert seconds < 20, out
            assert "worker 2" in message, out
        for name in ["scheduler", "server0"]:
            code, out = job.wait(name, timeout=30)
            assert code != 0 and "worker 2" in out, out


@pytest.mark.timeout(60)
@pytest.mark.parametrize("missing", ["DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT", "DMLC_NUM_WORKER",
                                     "DMLC_NUM_SERVER", "DMLC_WORKER_ID"])
def test_missing_dmlc_variable_is_named(missing):
    env = dict(DMLC_ROLE="worker", DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=9, DMLC_NUM_WORKER=2,
               DMLC_NUM_SERVER=1, DMLC_WORKER_ID=0, BYTEPS_JOB_SECRET="0123456789abcdef")
    del env[missing]
    code = "import bps_tf.numpy as bps\ntry:\n    bps.init()\nexcept ValueError as e:\n    print(e)"
    result = subprocess.run([sys.executable, "-c", code], env=clean_env(**env), capture_output=True, text=True,
                            timeout=50)
    assert f"{missing} is not set" in result.stdout, result.stdout + result.stderr


@pytest.mark.timeout(60)
def test_init_without_a_role_says_how_to_launch():
    code = "import bps_tf.numpy as bps\ntry:\n    bps.init()\nexcept ValueError as e:\n    print(e)"
    result = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True,
                            timeout=50)
    assert "DMLC_ROLE is not set" in result.stdout and "bpslaunch" in result.stdout, result.stdout


@pytest.mark.timeout(60)
def test_push_pull_before_init_is_an_error():
    code = ("import numpy, bps_tf.numpy as bps\ntry:\n    bps.push_pull(numpy.ones(2), 'x', average=False)\n"
            "except RuntimeError as e:\n    print(e)")
    result = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True,
                            timeout=50)
    assert "call bps_tf.init() first" in result.stdout, result.stdout + result.stderr
