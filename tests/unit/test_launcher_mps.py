"""bpslaunch's MPS control daemon (bps_tf/launcher/mps.py), against the stand-in of testing/fake_mps.py."""

import os
import socket
import time

import pytest

from bps_tf.launcher import mps
from testing import fake_mps


@pytest.fixture
def control(tmp_path, monkeypatch):
    """The stand-in's path; its record file is read by records()."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("FAKE_MPS_RECORD", str(tmp_path / "record"))
    monkeypatch.delenv(mps.PIPE_VARIABLE, raising=False)
    monkeypatch.delenv("FAKE_MPS_MODE", raising=False)
    return fake_mps.install(str(folder))


def records(tmp_path):
    path = tmp_path / "record"
    return path.read_text().split("\n")[:-1] if path.exists() else []


def finder(path):
    return lambda name: path if name == mps.CONTROL else None


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize("flag, value, wanted", [
    (True, None, True), (False, None, False), (False, "1", True), (False, "yes", True), (False, "0", False),
    (False, "", False), (True, "0", True)])
def test_mps_is_requested_by_the_flag_or_the_variable(flag, value, wanted):
    environ = {} if value is None else {mps.VARIABLE: value}
    assert mps.requested(flag, environ) is wanted


def test_a_setting_that_is_not_yes_or_no_is_refused():
    with pytest.raises(mps.MpsError, match="BYTEPS_MPS='maybe': give 1"):
        mps.requested(False, {mps.VARIABLE: "maybe"})


def test_the_daemon_listens_while_the_job_runs_and_quits_after_it(control, tmp_path):
    environ = {"PATH": os.environ["PATH"], "FAKE_MPS_RECORD": str(tmp_path / "record")}
    with mps.job_daemon(environ, True, which=finder(control)):
        pipe = environ[mps.PIPE_VARIABLE]
        assert os.path.isdir(environ[mps.LOG_VARIABLE])
        started = records(tmp_path)
        assert len(started) == 1 and started[0].split()[2] == pipe
        pid = int(started[0].split()[1])
        assert alive(pid)
        probe = socket.socket(socket.AF_UNIX)
        probe.connect(os.path.join(pipe, mps.SOCKET))  # a CUDA process would connect now
        probe.close()
    assert records(tmp_path)[1:] == [f"quit {pid}"]
    assert not alive(pid)
    assert not os.path.exists(os.path.dirname(pipe))  # the job's folder is gone
    assert mps.PIPE_VARIABLE not in environ and mps.LOG_VARIABLE not in environ


def test_the_daemon_quits_when_the_job_fails(control, tmp_path):
    environ = {"FAKE_MPS_RECORD": str(tmp_path / "record")}
    with pytest.raises(RuntimeError):
        with mps.job_daemon(environ, True, which=finder(control)):
            raise RuntimeError("the job failed")
    assert [line.split()[0] for line in records(tmp_path)] == ["started", "quit"]


def test_nothing_starts_when_not_asked_for_or_when_a_daemon_is_named(control, tmp_path):
    for environ, enabled in (({}, False), ({mps.PIPE_VARIABLE: "/run/theirs"}, True)):
        before = dict(environ)
        with mps.job_daemon(environ, enabled, which=finder(control)):
            assert environ == before
    assert records(tmp_path) == []


def test_a_machine_without_the_control_program_gets_a_clear_error():
    with pytest.raises(mps.MpsError, match="nvidia-cuda-mps-control is not on PATH.*install them, or leave --mps"):
        with mps.job_daemon({}, True, which=lambda name: None):
            pytest.fail("the job ran without MPS")


def test_a_daemon_that_cannot_start_is_reported_with_what_it_said(control, tmp_path):
    environ = {"FAKE_MPS_RECORD": str(tmp_path / "record"), "FAKE_MPS_MODE": "exit"}
    with pytest.raises(mps.MpsError, match="(?s)exited; it said:\nfake mps: cannot open the GPU.*another MPS"):
        with mps.job_daemon(environ, True, which=finder(control)):
            pytest.fail("the job ran without MPS")
    assert mps.PIPE_VARIABLE not in environ


def test_a_daemon_that_never_listens_is_stopped_after_the_start_timeout(control, tmp_path):
    environ = {"FAKE_MPS_RECORD": str(tmp_path / "record"), "FAKE_MPS_MODE": "mute"}
    start = time.monotonic()
    with pytest.raises(mps.MpsError, match="did not listen within 1 s"):
        with mps.job_daemon(environ, True, which=finder(control), start_timeout=1.0):
            pytest.fail("the job ran without MPS")
    assert time.monotonic() - start < 10
    pid = int(records(tmp_path)[0].split()[1])
    assert not alive(pid)


def test_a_daemon_that_ignores_quit_is_killed(control, tmp_path):
    environ = {"FAKE_MPS_RECORD": str(tmp_path / "record"), "FAKE_MPS_MODE": "stubborn"}
    start = time.monotonic()
    with mps.job_daemon(environ, True, which=finder(control), stop_timeout=1.0):
        pid = int(records(tmp_path)[0].split()[1])
    assert not alive(pid)
    assert time.monotonic() - start < 15  # 1 s for quit, 5 s for SIGTERM, then SIGKILL
