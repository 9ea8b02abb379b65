"""bpslaunch --mps with real jobs (the native core, real processes), NVIDIA's MPS control program replaced by
the stand-in of testing/fake_mps.py."""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from testing import fake_mps
from testing.jobs import BPSLAUNCH, clean_env, communicate_all, free_port, kill_process_groups

# Connects to the daemon named by its environment, as CUDA would at its first call, then joins the job.
WORKER = textwrap.dedent("""
    import os, socket, sys, time
    import bps_tf as bps
    pipe = os.environ["CUDA_MPS_PIPE_DIRECTORY"]
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    probe.connect(os.path.join(pipe, "control"))
    probe.close()
    bps.init()
    print("worker", bps.rank(), "mps", pipe, flush=True)
    if os.environ.get("WORKER_SLEEPS"):
        time.sleep(600)
    bps.shutdown()
    sys.exit(int(os.environ.get("WORKER_EXIT", "0")))
""")


@pytest.fixture
def fake_env(tmp_path):
    """The environment of a bpslaunch that finds the stand-in first on PATH."""
    folder = tmp_path / "bin"
    folder.mkdir()
    fake_mps.install(str(folder))
    return dict(PATH=f"{folder}{os.pathsep}{os.environ['PATH']}", FAKE_MPS_RECORD=str(tmp_path / "record"))


def events(tmp_path):
    return [line.split()[0] for line in (tmp_path / "record").read_text().splitlines()]


def daemon_pipe(tmp_path):
    return (tmp_path / "record").read_text().splitlines()[0].split()[2]


@pytest.mark.timeout(180)
def test_a_local_job_runs_its_workers_under_a_daemon_of_its_own(tmp_path, fake_env):
    done = subprocess.run([BPSLAUNCH, "--local", "--workers", "2", "--mps", "--timeout", "120", "--",
                           sys.executable, "-c", WORKER], env=clean_env(**fake_env), capture_output=True,
                          text=True, timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    pipe = daemon_pipe(tmp_path)
    for rank in (0, 1):
        assert f"[worker {rank}] worker {rank} mps {pipe}" in done.stdout.splitlines()
    assert events(tmp_path) == ["started", "quit"]
    assert not os.path.exists(pipe)


@pytest.mark.timeout(180)
def test_the_daemon_is_quit_when_a_worker_fails(tmp_path, fake_env):
    done = subprocess.run([BPSLAUNCH, "--local", "--workers", "2", "--timeout", "120", "--", sys.executable, "-c",
                           WORKER], env=clean_env(BYTEPS_MPS="1", WORKER_EXIT="3", **fake_env),
                          capture_output=True, text=True, timeout=150)
    assert done.returncode == 3, done.stderr[-3000:]
    assert events(tmp_path) == ["started", "quit"]


@pytest.mark.timeout(60)
def test_without_the_control_program_the_job_does_not_start(tmp_path):
    path = f"{Path(sys.executable).parent}{os.pathsep}/usr/bin{os.pathsep}/bin"
    if shutil.which(fake_mps.NAME, path=path):
        pytest.skip("this machine has NVIDIA's MPS")
    marker = tmp_path / "started"
    done = subprocess.run([BPSLAUNCH, "--local", "--mps", "--", sys.executable, "-c",
                           f"open({str(marker)!r}, 'w')"], env=clean_env(PATH=path), capture_output=True, text=True,
                          timeout=50)
    assert done.returncode == 1
    assert "nvidia-cuda-mps-control is not on PATH" in done.stderr and "leave --mps out" in done.stderr
    assert not marker.exists()


@pytest.mark.timeout(180)
def test_in_a_cluster_job_only_the_worker_machine_starts_a_daemon(tmp_path, fake_env):
    layout = dict(DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=str(free_port()), DMLC_NUM_WORKER="1",
                  DMLC_NUM_SERVER="1", DMLC_NODE_HOST="127.0.0.1", BYTEPS_TIMEOUT="60", BYTEPS_MPS="1",
                  BYTEPS_JOB_SECRET="the secret of this cluster-mode test job", **fake_env)
    roles = [([], "scheduler"), ([], "server"), ([sys.executable, "-c", WORKER], "worker")]
    processes = [subprocess.Popen([BPSLAUNCH] + args, env=clean_env(DMLC_ROLE=role, DMLC_WORKER_ID="0", **layout),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
                 for args, role in roles]
    results = communicate_all(processes, timeout=120)
    for code, _, err in results:
        assert code == 0, err[-3000:]
    assert f"worker 0 mps {daemon_pipe(tmp_path)}" in results[2][1]
    assert events(tmp_path) == ["started", "quit"]


@pytest.mark.timeout(180)
def test_sigterm_to_bpslaunch_stops_the_job_and_quits_the_daemon(tmp_path, fake_env):
    launcher = subprocess.Popen([BPSLAUNCH, "--local", "--workers", "2", "--mps", "--", sys.executable, "-c", WORKER],
                                env=clean_env(WORKER_SLEEPS="1", **fake_env), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        for line in launcher.stdout:  # both workers run under the daemon
            if "[worker 1] worker 1 mps" in line:
                break
        launcher.send_signal(signal.SIGTERM)
        launcher.communicate(timeout=60)
    finally:
        kill_process_groups([launcher])
    assert launcher.returncode == 128 + signal.SIGTERM
    assert events(tmp_path) == ["started", "quit"]


@pytest.mark.timeout(60)
def test_a_worker_process_started_alone_is_refused_a_daemon_of_its_own(tmp_path, fake_env):
    """With BYTEPS_LOCAL_RANK each process has a bpslaunch of its own, whose daemons would not be shared."""
    done = subprocess.run([BPSLAUNCH, "--mps", sys.executable, "-c", "pass"],
                          env=clean_env(DMLC_ROLE="worker", BYTEPS_LOCAL_RANK="1", **fake_env), capture_output=True,
                          text=True, timeout=50)
    assert done.returncode == 1
    assert "BYTEPS_LOCAL_RANK set" in done.stderr and "CUDA_MPS_PIPE_DIRECTORY" in done.stderr
    assert not (tmp_path / "record").exists()
