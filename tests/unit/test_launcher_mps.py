"""bpslaunch's MPS control daemon (bps_tf/launcher/mps.py), against the stand-in of testing/fake_mps.py."""

import os
import signal
import socket
import threading
import time

import pytest

from bps_tf.launcher import mps
from testing import fake_mps


@pytest.fixture
def control(tmp_path):
    """The stand-in's path; its record file is read by records()."""
    folder = tmp_path / "bin"
    folder.mkdir()
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


def environment(tmp_path, **extra):
    return {"FAKE_MPS_RECORD": str(tmp_path / "record"), **extra}


@pytest.mark.parametrize("flag, value, wanted", [
    (True, None, True), (False, None, False), (False, "1", True), (False, "yes", True), (False, "0", False),
    (False, "", False), (True, "0", True)])
def test_mps_is_requested_by_the_flag_or_the_variable(flag, value, wanted):
    environ = {} if value is None else {mps.VARIABLE: value}
    assert mps.requested(flag, environ) is wanted


def test_a_setting_that_is_not_yes_or_no_is_refused():
    with pytest.raises(mps.MpsError, match="BYTEPS_MPS='maybe': give 1"):
        mps.requested(False, {mps.VARIABLE: "maybe"})


def test_the_daemon_accepts_connections_while_the_job_runs_and_quits_after_it(control, tmp_path):
    environ = environment(tmp_path, **{mps.PIPE_VARIABLE: ""})
    seen = {}

    def job():
        seen.update(environ)
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        probe.connect(os.path.join(environ[mps.PIPE_VARIABLE], mps.SOCKET))  # as a CUDA process would
        probe.close()
        seen["pid"] = int(records(tmp_path)[0].split()[1])
        assert alive(seen["pid"]) and os.path.isdir(environ[mps.LOG_VARIABLE])
        return 7

    assert mps.run_under_daemon(environ, job, which=finder(control)) == 7
    pipe = seen[mps.PIPE_VARIABLE]
    assert records(tmp_path) == [f"started {seen['pid']} {pipe}", f"quit {seen['pid']}"]
    assert not alive(seen["pid"])
    assert not os.path.exists(os.path.dirname(pipe))  # the job's folder is gone
    assert environ == environment(tmp_path, **{mps.PIPE_VARIABLE: ""})  # as it was, the empty value included


def test_a_log_folder_the_user_set_is_used_and_kept(control, tmp_path):
    logs = tmp_path / "mps_logs"
    environ = environment(tmp_path, **{mps.LOG_VARIABLE: str(logs)})
    seen = {}
    mps.run_under_daemon(environ, lambda: seen.update(environ), which=finder(control))
    assert seen[mps.LOG_VARIABLE] == str(logs) and (logs / mps.DAEMON_OUTPUT).is_file()
    assert environ[mps.LOG_VARIABLE] == str(logs) and mps.PIPE_VARIABLE not in environ


def test_the_daemon_quits_when_the_job_raises(control, tmp_path):
    def job():
        raise RuntimeError("the job failed")

    environ = environment(tmp_path)
    with pytest.raises(RuntimeError):
        mps.run_under_daemon(environ, job, which=finder(control))
    assert [line.split()[0] for line in records(tmp_path)] == ["started", "quit"]
    assert environ == environment(tmp_path)


def test_a_daemon_named_already_is_used_as_it_is(control, tmp_path):
    environ = {mps.PIPE_VARIABLE: "/run/theirs"}
    assert mps.run_under_daemon(environ, lambda: dict(environ), which=finder(control)) == environ
    assert records(tmp_path) == []


def test_a_machine_without_the_control_program_gets_a_clear_error():
    with pytest.raises(mps.MpsError, match="nvidia-cuda-mps-control is not on PATH.*install them, or leave --mps"):
        mps.run_under_daemon({}, lambda: pytest.fail("the job ran without MPS"), which=lambda name: None)


def test_a_daemon_that_cannot_start_is_reported_with_what_it_said(control, tmp_path):
    environ = environment(tmp_path, FAKE_MPS_MODE="exit")
    with pytest.raises(mps.MpsError, match="(?s)exited with code 1; it said:\nfake mps: cannot open the GPU.*another MPS"):
        mps.run_under_daemon(environ, lambda: pytest.fail("the job ran without MPS"), which=finder(control))
    assert mps.PIPE_VARIABLE not in environ


def test_a_daemon_that_never_listens_is_stopped_after_the_start_timeout(control, tmp_path):
    start = time.monotonic()
    with pytest.raises(mps.MpsError, match="did not accept connections within 3 s"):
        mps.run_under_daemon(environment(tmp_path, FAKE_MPS_MODE="mute"), lambda: pytest.fail("the job ran"),
                             which=finder(control), start_timeout=3.0)
    assert time.monotonic() - start < 15
    # (on a loaded machine the stand-in may not have started, and recorded itself, within the 3 s)
    assert not any(alive(int(line.split()[1])) for line in records(tmp_path))


def test_a_log_folder_that_cannot_be_made_is_a_clear_error(control, tmp_path):
    environ = environment(tmp_path, **{mps.LOG_VARIABLE: "/proc/no/such/folder"})
    with pytest.raises(mps.MpsError, match="cannot make the MPS daemon's folders .*check CUDA_MPS_LOG_DIRECTORY"):
        mps.run_under_daemon(environ, lambda: pytest.fail("the job ran"), which=finder(control))
    assert records(tmp_path) == []


def test_a_signal_as_the_daemon_becomes_ready_runs_no_job(control, tmp_path, monkeypatch):
    accepts = mps._accepts

    def accepts_then_sigterm(path):
        if not accepts(path):
            return False
        os.kill(os.getpid(), signal.SIGTERM)
        return True

    monkeypatch.setattr(mps, "_accepts", accepts_then_sigterm)
    code = mps.run_under_daemon(environment(tmp_path), lambda: pytest.fail("the job ran"), which=finder(control))
    assert code == 128 + signal.SIGTERM
    assert not alive(int(records(tmp_path)[0].split()[1]))


def test_a_signal_before_the_job_takes_over_signals_reaches_the_job(control, tmp_path):
    """The job's own StopSignals shares the record of the one that covered the daemon's start."""
    from bps_tf.launcher.stop_signals import StopSignals

    def job():
        os.kill(os.getpid(), signal.SIGINT)  # before the job's handlers are in
        with StopSignals() as stop:
            return SIGNAL_SEEN if stop.received == [signal.SIGINT] else 0

    SIGNAL_SEEN = 99
    assert mps.run_under_daemon(environment(tmp_path), job, which=finder(control)) == SIGNAL_SEEN
    assert [line.split()[0] for line in records(tmp_path)] == ["started", "quit"]


def test_a_signal_while_the_daemon_starts_stops_it_and_runs_no_job(control, tmp_path):
    """SIGTERM while the daemon is not yet listening: the daemon is stopped, the job never runs, 128 + 15."""
    def send_sigterm_once_started():
        while not records(tmp_path):
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=send_sigterm_once_started, daemon=True).start()
    code = mps.run_under_daemon(environment(tmp_path, FAKE_MPS_MODE="mute"), lambda: pytest.fail("the job ran"),
                                which=finder(control), start_timeout=60.0)
    assert code == 128 + signal.SIGTERM
    assert not alive(int(records(tmp_path)[0].split()[1]))


def test_a_daemon_that_ignores_quit_is_killed(control, tmp_path):
    start = time.monotonic()
    mps.run_under_daemon(environment(tmp_path, FAKE_MPS_MODE="stubborn"), lambda: 0, which=finder(control),
                         stop_timeout=1.0)
    assert not alive(int(records(tmp_path)[0].split()[1]))
    assert time.monotonic() - start < 15  # 1 s for quit, 5 s after SIGTERM, then SIGKILL
