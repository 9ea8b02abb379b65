"""Tests of bpslaunch (bps_tf/launcher).

Most tests replace the native core: local jobs get stand-in scheduler/server commands through
`run_local_job(role_command=...)`, and cluster-mode tests put a fake `bps_tf._core` module in place.
TestRealCore runs the real `bpslaunch` against the real core.
"""

import io
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest

from bps_tf.launcher import role
from bps_tf.launcher.local_job import TIMEOUT_EXIT_CODE, run_local_job
from bps_tf.launcher.main import main
from testing.jobs import REPO_ROOT, clean_env, communicate_all, free_port

LAUNCHER = [sys.executable, "-m", "bps_tf.launcher"]


def python(code):
    """argv running a Python snippet."""
    return [sys.executable, "-c", textwrap.dedent(code)]


def is_alive(pid):
    """os.kill(pid, 0), except that a zombie counts as dead (nobody may be left to reap orphans here)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def wait_until(condition, timeout, what):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def assert_all_dead(pids, timeout=5.0):
    assert pids, "no pids were recorded"
    wait_until(lambda: not any(is_alive(pid) for pid in pids), timeout, f"processes {pids} to end")


def recorded_pids(pid_dir):
    # ".<pid>" files are still being written (renamed when complete).
    return [int(path.name) for path in Path(pid_dir).iterdir() if not path.name.startswith(".")]


# Stand-ins for processes. Each reads PID_DIR from the environment the launcher passes on, records its pid there
# (written under a temporary name, then renamed, so a reader never sees an empty file), and prints as told.
RECORD_PID = """
import os, pathlib, signal, sys, time
def record(pid):
    directory = pathlib.Path(os.environ["PID_DIR"])
    (directory / f".{pid}").write_text("")
    (directory / f".{pid}").rename(directory / str(pid))
record(os.getpid())
"""


def recording_pid(body):
    """argv of a stand-in that records its pid, then runs the Python snippet `body`."""
    return python(RECORD_PID + textwrap.dedent(body))


HANGING = recording_pid("time.sleep(600)")
EXITING_AT_ONCE = python("import os; print('up as', os.environ['DMLC_ROLE'])")
IGNORING_SIGTERM = recording_pid("signal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(600)")


def run_job(command, workers=1, servers=1, role_command=EXITING_AT_ONCE, **options):
    """Runs a local job in this process; returns (exit code, stdout text, stderr text, seconds taken)."""
    stdout, stderr = io.StringIO(), io.StringIO()
    started = time.monotonic()
    code = run_local_job(command, workers, servers, role_command=role_command, stdout=stdout, stderr=stderr,
                         **options)
    return code, stdout.getvalue(), stderr.getvalue(), time.monotonic() - started


@pytest.fixture
def pid_dir(tmp_path, monkeypatch):
    directory = tmp_path / "pids"
    directory.mkdir()
    # The launcher passes the user's environment through to every process.
    monkeypatch.setenv("PID_DIR", str(directory))
    return directory


class TestOutput:
    @pytest.mark.timeout(30)
    def test_lines_are_prefixed_with_role_and_rank(self):
        worker = python("""
            import os, sys
            rank = os.environ['DMLC_WORKER_ID']
            print('out', rank)
            print('err', rank, file=sys.stderr)
            sys.stdout.write('no newline at the end ' + rank)
        """)
        code, out, err, _ = run_job(worker, workers=2, servers=2)
        assert code == 0, err
        out_lines, err_lines = out.splitlines(), err.splitlines()
        for line in ["[scheduler] up as scheduler", "[server 0] up as server", "[server 1] up as server",
                     "[worker 0] out 0", "[worker 1] out 1",
                     "[worker 0] no newline at the end 0", "[worker 1] no newline at the end 1"]:
            assert line in out_lines
        assert "[worker 0] err 0" in err_lines and "[worker 1] err 1" in err_lines

    @pytest.mark.timeout(30)
    def test_lines_of_different_processes_never_mix(self):
        worker = python("""
            import os
            rank = os.environ['DMLC_WORKER_ID']
            for _ in range(300):
                print(rank * 3000)
        """)
        code, out, err, _ = run_job(worker, workers=3)
        assert code == 0, err
        worker_lines = [line for line in out.splitlines() if line.startswith("[worker")]
        assert len(worker_lines) == 900
        for line in worker_lines:
            rank = re.fullmatch(r"\[worker (\d)\] (\d)+", line).group(1)
            assert line == f"[worker {rank}] " + rank * 3000


class TestEnvironment:
    @pytest.mark.timeout(30)
    def test_each_process_gets_its_role_and_the_job_layout(self, monkeypatch):
        monkeypatch.setenv("BYTEPS_PARTITION_BYTES", "1234")
        monkeypatch.setenv("DMLC_WORKER_ID", "99")  # a leftover in the user's shell
        monkeypatch.setenv("DMLC_ROLE", "worker")
        dump = python("""
            import json, os
            names = ['DMLC_ROLE', 'DMLC_WORKER_ID', 'DMLC_NUM_WORKER', 'DMLC_NUM_SERVER', 'DMLC_PS_ROOT_URI',
                     'DMLC_PS_ROOT_PORT', 'DMLC_NODE_HOST', 'PYTHONUNBUFFERED', 'BYTEPS_PARTITION_BYTES']
            print(json.dumps({name: os.environ.get(name) for name in names}))
        """)
        code, out, err, _ = run_job(dump, workers=2, servers=3, role_command=dump)
        assert code == 0, err
        seen = {}
        for line in out.splitlines():
            label, payload = re.fullmatch(r"\[(.+?)\] (.*)", line).groups()
            seen[label] = json.loads(payload)
        assert sorted(seen) == ["scheduler", "server 0", "server 1", "server 2", "worker 0", "worker 1"]
        ports = {env["DMLC_PS_ROOT_PORT"] for env in seen.values()}
        assert len(ports) == 1 and 0 < int(ports.pop()) < 65536
        for label, env in seen.items():
            assert env["DMLC_ROLE"] == label.split()[0]
            assert env["DMLC_WORKER_ID"] == (label.split()[1] if label.startswith("worker") else None)
            assert env["DMLC_NUM_WORKER"] == "2" and env["DMLC_NUM_SERVER"] == "3"
            assert env["DMLC_PS_ROOT_URI"] == "127.0.0.1" and env["DMLC_NODE_HOST"] == "127.0.0.1"
            assert env["PYTHONUNBUFFERED"] == "1"
            assert env["BYTEPS_PARTITION_BYTES"] == "1234"


class TestFailures:
    @pytest.mark.timeout(30)
    def test_failing_worker_stops_the_others(self, pid_dir):
        worker = recording_pid("""
            if os.environ['DMLC_WORKER_ID'] == '1':
                while len(os.listdir(os.environ['PID_DIR'])) < 4:  # everybody is up
                    time.sleep(0.01)
                sys.exit(3)
            time.sleep(600)
        """)
        code, _, err, seconds = run_job(worker, workers=2, servers=1, role_command=HANGING)
        assert code == 3
        assert "bpslaunch: worker 1 exited with code 3; stopping all processes" in err.splitlines()
        assert seconds < 10
        assert len(recorded_pids(pid_dir)) == 4
        assert_all_dead(recorded_pids(pid_dir))

    @pytest.mark.timeout(30)
    def test_worker_killed_by_a_signal_is_reported(self):
        worker = python("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
        code, _, err, _ = run_job(worker)
        assert code == 128 + signal.SIGKILL
        assert "bpslaunch: worker 0 was killed by SIGKILL; stopping all processes" in err

    @pytest.mark.timeout(30)
    def test_failing_server_stops_the_job(self, pid_dir):
        server_fails = recording_pid("sys.exit(5 if os.environ['DMLC_ROLE'] == 'server' else 0)")
        code, _, err, _ = run_job(HANGING, servers=2, role_command=server_fails)
        assert code == 5
        assert re.search(r"bpslaunch: server \d exited with code 5; stopping all processes", err)
        assert_all_dead(recorded_pids(pid_dir))

    @pytest.mark.timeout(30)
    def test_processes_spawned_by_a_worker_are_stopped_too(self, pid_dir):
        worker = recording_pid("""
            import subprocess
            if os.environ['DMLC_WORKER_ID'] == '0':
                grandchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])
                record(grandchild.pid)
                time.sleep(600)
            while len(os.listdir(os.environ['PID_DIR'])) < 3:
                time.sleep(0.01)
            sys.exit(1)
        """)
        code, _, err, _ = run_job(worker, workers=2)
        assert code == 1, err
        assert len(recorded_pids(pid_dir)) == 3
        assert_all_dead(recorded_pids(pid_dir))

    @pytest.mark.timeout(30)
    def test_missing_command_is_reported(self):
        code, _, err, _ = run_job(["/nonexistent/train"])
        assert code == 127
        assert "bpslaunch: cannot start worker 0 (/nonexistent/train)" in err


class TestShutdown:
    @pytest.mark.timeout(30)
    def test_scheduler_and_servers_may_exit_after_the_workers(self):
        exits_later = python("import time; time.sleep(1)")
        code, _, err, seconds = run_job(python("pass"), servers=2, role_command=exits_later, shutdown_grace=10)
        assert code == 0, err
        assert "bpslaunch" not in err
        assert 1 <= seconds < 5

    @pytest.mark.timeout(30)
    def test_hanging_servers_are_killed_and_reported(self, pid_dir):
        code, _, err, seconds = run_job(python("pass"), servers=2, role_command=HANGING, shutdown_grace=0.5)
        assert code == 1
        assert ("bpslaunch: all workers finished, but scheduler, server 0, server 1 did not exit within 0.5 s; "
                "killing them") in err
        assert seconds < 10
        assert_all_dead(recorded_pids(pid_dir))

    @pytest.mark.timeout(30)
    def test_processes_ignoring_sigterm_are_killed(self, pid_dir):
        code, _, _, seconds = run_job(python("pass"), role_command=IGNORING_SIGTERM, shutdown_grace=0.2,
                                      kill_grace=0.5)
        assert code == 1
        assert seconds < 5
        assert_all_dead(recorded_pids(pid_dir))


# Elastic jobs: the scheduler and servers exit 0 once every worker left the job (here: after a second), while
# the workers' processes may still run their code at exit. A worker process creates the file bpslaunch names
# once it joined the job, as bps_tf.process.init() does.
ROLES_ENDING_THE_JOB = python("import time; time.sleep(1)")
JOINED = "import os, sys, time\nopen(os.environ['BPSLAUNCH_JOINED_FILE'], 'a').close()\n"


class TestElasticEnd:
    @pytest.mark.timeout(30)
    def test_workers_that_joined_exit_on_their_own_after_the_job_ended(self):
        worker = python(JOINED + "time.sleep(2); print('exited on its own')")
        code, out, err, _ = run_job(worker, workers=2, role_command=ROLES_ENDING_THE_JOB, elastic=(1, 2))
        assert code == 0, err
        assert "joined it" not in err, err
        assert out.count("exited on its own") == 2, out

    @pytest.mark.timeout(30)
    def test_a_worker_that_never_joined_is_named_and_stopped(self, pid_dir):
        worker = recording_pid("""
            if os.environ['DMLC_WORKER_ID'] == '0':
                open(os.environ['BPSLAUNCH_JOINED_FILE'], 'a').close()
                sys.exit(0)
            time.sleep(600)  # started too late: still starting when the job ended
        """)
        code, _, err, seconds = run_job(worker, workers=2, role_command=ROLES_ENDING_THE_JOB, elastic=(1, 2))
        assert code == 0, err
        assert "bpslaunch: the job ended before worker 1 joined it; stopping it" in err.splitlines(), err
        assert seconds < 10
        assert_all_dead(recorded_pids(pid_dir))

    @pytest.mark.timeout(30)
    def test_a_worker_that_fails_after_the_job_ended_fails_bpslaunch(self):
        worker = python(JOINED + "time.sleep(2); sys.exit(3)")
        code, _, err, _ = run_job(worker, workers=1, role_command=ROLES_ENDING_THE_JOB, elastic=(1, 1))
        assert code == 3, err
        assert "bpslaunch: worker 0 exited with code 3 after the job ended" in err.splitlines(), err


class TestTimeout:
    @pytest.mark.timeout(30)
    def test_job_is_stopped_at_its_timeout(self, pid_dir):
        code, _, err, seconds = run_job(HANGING, workers=2, role_command=HANGING, timeout=1)
        assert code == TIMEOUT_EXIT_CODE
        assert "bpslaunch: the job did not finish within --timeout 1 s; stopping all processes" in err
        assert 1 <= seconds < 8
        assert_all_dead(recorded_pids(pid_dir))


# Prints the worker's place in the job as `{"DMLC_WORKER_ID": ..., "BYTEPS_LOCAL_RANK": ..., "BYTEPS_LOCAL_SIZE": ...}`.
DUMP_LOCAL_PLACE = python("""
    import json, os
    print(json.dumps({name: os.environ.get(name)
                      for name in ('DMLC_WORKER_ID', 'BYTEPS_LOCAL_RANK', 'BYTEPS_LOCAL_SIZE')}))
""")


def places_by_label(out):
    """{label: the JSON a process printed} from prefixed output lines."""
    return {label: json.loads(payload)
            for label, payload in (re.fullmatch(r"\[(.+?)\] (.*)", line).groups() for line in out.splitlines())}


class TestLocalSize:
    @pytest.mark.timeout(30)
    def test_each_machine_runs_local_size_processes(self, monkeypatch):
        # Leftovers in the user's shell: --local-size decides, and only workers get a local rank.
        monkeypatch.setenv("BYTEPS_LOCAL_SIZE", "7")
        monkeypatch.setenv("BYTEPS_LOCAL_RANK", "5")
        code, out, err, _ = run_job(DUMP_LOCAL_PLACE, workers=2, servers=1, local_size=2,
                                    role_command=DUMP_LOCAL_PLACE)
        assert code == 0, err
        seen = places_by_label(out)
        assert sorted(seen) == ["scheduler", "server 0", "worker 0.0", "worker 0.1", "worker 1.0", "worker 1.1"]
        for machine in range(2):
            for local_rank in range(2):
                assert seen[f"worker {machine}.{local_rank}"] == {
                    "DMLC_WORKER_ID": str(machine), "BYTEPS_LOCAL_RANK": str(local_rank), "BYTEPS_LOCAL_SIZE": "2"}
        none = {"DMLC_WORKER_ID": None, "BYTEPS_LOCAL_RANK": None, "BYTEPS_LOCAL_SIZE": None}
        assert seen["scheduler"] == none and seen["server 0"] == none

    @pytest.mark.timeout(30)
    def test_one_process_per_machine_keeps_the_plain_labels(self, monkeypatch):
        monkeypatch.setenv("BYTEPS_LOCAL_SIZE", "7")
        code, out, err, _ = run_job(DUMP_LOCAL_PLACE, workers=2, role_command=DUMP_LOCAL_PLACE)
        assert code == 0, err
        seen = {label: place for label, place in places_by_label(out).items() if label.startswith("worker")}
        assert seen == {f"worker {machine}": {"DMLC_WORKER_ID": str(machine), "BYTEPS_LOCAL_RANK": "0",
                                              "BYTEPS_LOCAL_SIZE": "1"} for machine in range(2)}

    @pytest.mark.timeout(30)
    def test_failing_local_process_stops_its_siblings(self, pid_dir):
        worker = recording_pid("""
            if os.environ['BYTEPS_LOCAL_RANK'] == '1':
                while len(os.listdir(os.environ['PID_DIR'])) < 3:  # everybody is up
                    time.sleep(0.01)
                sys.exit(3)
            time.sleep(600)
        """)
        code, _, err, seconds = run_job(worker, workers=1, local_size=3, role_command=EXITING_AT_ONCE)
        assert code == 3
        assert "bpslaunch: worker 0.1 exited with code 3; stopping all processes" in err.splitlines()
        assert seconds < 10
        assert len(recorded_pids(pid_dir)) == 3
        assert_all_dead(recorded_pids(pid_dir))


# Runs a local job with stand-in roles in a process of its own, so that a test can signal it.
LOCAL_JOB_DRIVER = """
import sys
from bps_tf.launcher.local_job import run_local_job
role_command = [sys.executable, '-c', sys.argv[1]]
sys.exit(run_local_job([sys.executable, '-c', sys.argv[1]], 2, 1, role_command=role_command, timeout=60))
"""


class TestStopSignals:
    @pytest.mark.timeout(30)
    @pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
    def test_signal_to_the_launcher_stops_everything(self, pid_dir, signum):
        hanging_code = HANGING[2]
        launcher = subprocess.Popen(python(LOCAL_JOB_DRIVER) + [hanging_code], env=clean_env(),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: len(recorded_pids(pid_dir)) == 4, 15, "scheduler, server and 2 workers to start")
            launcher.send_signal(signum)
            _, err = launcher.communicate(timeout=15)
        finally:
            launcher.kill()
        assert launcher.returncode == 128 + signum
        assert f"bpslaunch: received {signal.Signals(signum).name}; stopping all processes" in err
        assert_all_dead(recorded_pids(pid_dir))


class TestClusterMode:
    @pytest.mark.timeout(30)
    def test_missing_dmlc_role_names_it_and_suggests_local(self):
        result = subprocess.run(LAUNCHER + ["python", "train.py"], env=clean_env(), capture_output=True,
                                text=True, timeout=20)
        assert result.returncode == 1
        assert "bpslaunch: DMLC_ROLE is not set" in result.stderr
        assert "bpslaunch --local" in result.stderr


def fake_core(validate_error=None, role_error=None):
    """A stand-in for bps_tf._core that records its calls."""
    calls = []

    def validate_environment():
        calls.append("validate_environment")
        if validate_error:
            raise validate_error

    def run_role():
        calls.append("run_role")
        if role_error:
            raise role_error

    return types.SimpleNamespace(validate_environment=validate_environment, run_role=run_role, calls=calls)


@pytest.fixture
def install_core(monkeypatch):
    def install(core):
        monkeypatch.setitem(sys.modules, "bps_tf._core", core)
        return core
    return install


class TestClusterRoles:
    @pytest.fixture(autouse=True)
    def no_preload(self, monkeypatch):
        # These run the role in the test's own process, which a preload would replace (launcher/allocator.py).
        monkeypatch.setenv("BYTEPS_ALLOCATOR", "system")

    @pytest.mark.timeout(10)
    @pytest.mark.parametrize("role_name", ["scheduler", "server"])
    def test_scheduler_and_server_run_in_this_process(self, role_name, install_core, monkeypatch):
        core = install_core(fake_core())
        monkeypatch.setenv("DMLC_ROLE", role_name)
        handlers_before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
        assert main([]) == 0
        assert core.calls == ["validate_environment", "run_role"]
        assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers_before

    @pytest.mark.timeout(10)
    def test_invalid_environment_stops_a_server_before_it_runs(self, install_core, monkeypatch, capsys):
        message = "DMLC_NUM_SERVER is not set: set it to the number of servers"
        core = install_core(fake_core(validate_error=ValueError(message)))
        monkeypatch.setenv("DMLC_ROLE", "server")
        assert main([]) == 1
        assert core.calls == ["validate_environment"]
        assert capsys.readouterr().err == f"bpslaunch: {message}\n"

    @pytest.mark.timeout(10)
    def test_failed_role_is_reported(self, install_core, capsys):
        install_core(fake_core(role_error=RuntimeError("worker 1 stopped responding")))
        assert role.run_this_role() == 1
        assert capsys.readouterr().err == "bpslaunch: worker 1 stopped responding\n"

    @pytest.mark.timeout(10)
    def test_missing_core_is_reported(self, install_core, capsys):
        install_core(None)  # makes `import bps_tf._core` fail
        assert role.run_this_role() == 1
        assert "bpslaunch: cannot load the native core bps_tf._core" in capsys.readouterr().err

    @pytest.mark.timeout(30)
    def test_sigterm_ends_a_role_process_at_once(self):
        serving_forever = """
            import sys, time, types
            sys.modules['bps_tf._core'] = types.SimpleNamespace(
                validate_environment=lambda: None, run_role=lambda: (print('serving', flush=True), time.sleep(600)))
            from bps_tf.launcher.role import run_this_role
            sys.exit(run_this_role())
        """
        process = subprocess.Popen(python(serving_forever), env=clean_env(), stdout=subprocess.PIPE,
                                   text=True)
        try:
            assert process.stdout.readline() == "serving\n"
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=10) == -signal.SIGTERM
        finally:
            process.kill()
            process.stdout.close()


# Runs cluster-mode bpslaunch as a worker with a stand-in core, so that a test can signal it.
WORKER_DRIVER = """
    import sys, types
    sys.modules['bps_tf._core'] = types.SimpleNamespace(validate_environment=lambda: None)
    from bps_tf.launcher.cluster import run_worker_command
    sys.exit(run_worker_command([sys.executable, '-c', sys.argv[1]], kill_grace=float(sys.argv[2])))
"""


def start_worker(command_code, kill_grace=5.0, **env):
    return subprocess.Popen(python(WORKER_DRIVER) + [textwrap.dedent(command_code), str(kill_grace)],
                            env=clean_env(DMLC_ROLE="worker", **env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


class TestClusterWorker:
    @pytest.mark.timeout(30)
    def test_worker_runs_the_command_with_this_environment(self, install_core, monkeypatch, capfd):
        core = install_core(fake_core())
        monkeypatch.setenv("DMLC_ROLE", "worker")
        monkeypatch.setenv("BYTEPS_TRACE_ON", "1")
        command = python("import os, sys; print(os.environ['DMLC_ROLE'], os.environ['BYTEPS_TRACE_ON']); sys.exit(7)")
        assert main(command) == 7
        assert core.calls == ["validate_environment"]
        assert capfd.readouterr().out == "worker 1\n"

    @pytest.mark.timeout(10)
    def test_invalid_environment_stops_the_worker_before_the_command(self, install_core, monkeypatch, capfd,
                                                                      tmp_path):
        install_core(fake_core(validate_error=ValueError("DMLC_PS_ROOT_URI is not set: set it to ...")))
        monkeypatch.setenv("DMLC_ROLE", "worker")
        marker = tmp_path / "ran"
        assert main(python(f"open({str(marker)!r}, 'w')")) == 1
        assert not marker.exists()
        assert capfd.readouterr().err == "bpslaunch: DMLC_PS_ROOT_URI is not set: set it to ...\n"

    @pytest.mark.timeout(10)
    def test_worker_needs_a_command(self, install_core, monkeypatch, capsys):
        install_core(fake_core())
        monkeypatch.setenv("DMLC_ROLE", "worker")
        assert main([]) == 1
        assert "DMLC_ROLE=worker needs the training command" in capsys.readouterr().err

    @pytest.mark.timeout(30)
    @pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
    def test_signals_are_forwarded_to_the_command(self, signum):
        worker = start_worker("""
            import signal, sys, time
            def leave(signum, frame):
                print('got', signal.Signals(signum).name, flush=True)
                sys.exit(7)
            signal.signal(signal.SIGINT, leave)
            signal.signal(signal.SIGTERM, leave)
            print('ready', flush=True)
            time.sleep(600)
        """)
        try:
            assert worker.stdout.readline() == "ready\n"
            worker.send_signal(signum)
            out, _ = worker.communicate(timeout=15)
        finally:
            worker.kill()
        assert out == f"got {signal.Signals(signum).name}\n"
        assert worker.returncode == 7

    @pytest.mark.timeout(30)
    def test_command_ignoring_the_signal_is_killed(self, tmp_path):
        pid_file = tmp_path / "pid"
        worker = start_worker(f"""
            import os, signal, time
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            open({str(pid_file)!r}, 'w').write(str(os.getpid()))
            print('ready', flush=True)
            time.sleep(600)
        """, kill_grace=0.5)
        try:
            assert worker.stdout.readline() == "ready\n"
            worker.send_signal(signal.SIGTERM)
            _, err = worker.communicate(timeout=15)
        finally:
            worker.kill()
        assert worker.returncode == 128 + signal.SIGKILL
        assert "bpslaunch: the worker command did not exit within 0.5 s of SIGTERM; killed it" in err
        assert_all_dead([int(pid_file.read_text())])



class TestClusterWorkerLocalSize:
    """A cluster-mode worker with BYTEPS_LOCAL_SIZE=K runs the K processes of its machine."""

    @pytest.fixture(autouse=True)
    def worker_machine(self, install_core, monkeypatch):
        install_core(fake_core())
        monkeypatch.setenv("DMLC_ROLE", "worker")
        monkeypatch.setenv("DMLC_WORKER_ID", "1")
        monkeypatch.setenv("BYTEPS_LOCAL_SIZE", "2")
        monkeypatch.delenv("BYTEPS_LOCAL_RANK", raising=False)

    @pytest.mark.timeout(30)
    def test_local_size_copies_run_with_their_local_ranks(self, capsys):
        assert main(DUMP_LOCAL_PLACE) == 0
        seen = places_by_label(capsys.readouterr().out)
        assert seen == {f"worker 1.{local_rank}": {"DMLC_WORKER_ID": "1", "BYTEPS_LOCAL_RANK": str(local_rank),
                                                   "BYTEPS_LOCAL_SIZE": "2"} for local_rank in range(2)}

    @pytest.mark.timeout(30)
    def test_a_set_local_rank_runs_one_process_as_before(self, monkeypatch, capfd):
        monkeypatch.setenv("BYTEPS_LOCAL_RANK", "1")
        assert main(DUMP_LOCAL_PLACE) == 0
        out = capfd.readouterr().out
        assert json.loads(out) == {"DMLC_WORKER_ID": "1", "BYTEPS_LOCAL_RANK": "1", "BYTEPS_LOCAL_SIZE": "2"}

    @pytest.mark.timeout(30)
    def test_failing_copy_stops_its_sibling_with_its_exit_code(self, pid_dir, capsys):
        worker = recording_pid("""
            if os.environ['BYTEPS_LOCAL_RANK'] == '1':
                while len(os.listdir(os.environ['PID_DIR'])) < 2:  # both are up
                    time.sleep(0.01)
                sys.exit(3)
            time.sleep(600)
        """)
        started = time.monotonic()
        assert main(worker) == 3
        assert time.monotonic() - started < 10
        assert "bpslaunch: worker 1.1 exited with code 3; stopping the others" in capsys.readouterr().err
        assert len(recorded_pids(pid_dir)) == 2
        assert_all_dead(recorded_pids(pid_dir))

    @pytest.mark.timeout(30)
    @pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
    def test_signals_are_forwarded_to_every_copy(self, signum):
        worker = start_worker("""
            import os, signal, sys, time
            def leave(signum, frame):
                print('got', signal.Signals(signum).name, flush=True)
                sys.exit(7 if os.environ['BYTEPS_LOCAL_RANK'] == '1' else 0)
            signal.signal(signal.SIGINT, leave)
            signal.signal(signal.SIGTERM, leave)
            print('ready', flush=True)
            time.sleep(600)
        """, DMLC_WORKER_ID="0", BYTEPS_LOCAL_SIZE="2")
        try:
            ready = sorted(worker.stdout.readline() for _ in range(2))
            assert ready == ["[worker 0.0] ready\n", "[worker 0.1] ready\n"]
            worker.send_signal(signum)
            out, _ = worker.communicate(timeout=15)
        finally:
            worker.kill()
        name = signal.Signals(signum).name
        assert sorted(out.splitlines()) == [f"[worker 0.0] got {name}", f"[worker 0.1] got {name}"]
        assert worker.returncode == 7

    @pytest.mark.timeout(30)
    def test_copies_ignoring_the_signal_are_killed(self, tmp_path):
        worker = start_worker("""
            import os, signal, time
            if os.environ['BYTEPS_LOCAL_RANK'] == '1':
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            print('ready', flush=True)
            time.sleep(600)
        """, kill_grace=0.5, DMLC_WORKER_ID="0", BYTEPS_LOCAL_SIZE="2")
        try:
            for _ in range(2):
                worker.stdout.readline()
            worker.send_signal(signal.SIGTERM)
            _, err = worker.communicate(timeout=15)
        finally:
            worker.kill()
        assert worker.returncode == 128 + signal.SIGTERM  # the first to end: local rank 0, by the signal
        assert "bpslaunch: worker 0.1 did not exit within 0.5 s of SIGTERM; killed" in err


def bpslaunch_script():
    return str(Path(sys.executable).parent / "bpslaunch")


def descendants(pid):
    """Pids of all living descendants of `pid`, read from /proc."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, pending = [], [pid]
    while pending:
        children = parents.get(pending.pop(), [])
        found += children
        pending += children
    return found


# A worker that joins the job through the real core, so the scheduler and servers see it come and go.
# Assumes the Horovod-style API of bps_tf (init/shutdown/rank); adjust here if the API differs.
JOINING_WORKER = """
import bps_tf as bps
bps.init()
print('worker rank', bps.rank(), flush=True)
{body}
bps.shutdown()
"""


LOCAL_RANKS_WORKER = str(REPO_ROOT / "tests" / "workers" / "local_ranks.py")


class TestRealCore:
    """End to end through the real `bpslaunch` and the native core (fail until bps_tf._core exists)."""

    def run_bpslaunch(self, args, timeout=120, **env):
        return subprocess.run([bpslaunch_script()] + args, env=clean_env(**env), capture_output=True,
                              text=True, timeout=timeout)

    @pytest.mark.timeout(60)
    def test_console_script_is_installed(self):
        result = self.run_bpslaunch(["--help"])
        assert result.returncode == 0 and "--local" in result.stdout

    @pytest.mark.timeout(180)
    def test_local_job_succeeds_with_prefixed_output(self):
        worker = python(JOINING_WORKER.format(body=""))
        result = self.run_bpslaunch(["--local", "--workers", "2", "--servers", "2", "--timeout", "120", "--"]
                                    + worker, timeout=150)
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        assert "[worker 0] worker rank 0" in lines and "[worker 1] worker rank 1" in lines
        assert "bpslaunch:" not in result.stderr  # scheduler and servers exited on their own

    @pytest.mark.timeout(180)
    def test_local_job_with_several_processes_per_machine(self):
        result = self.run_bpslaunch(["--local", "--workers", "2", "--local-size", "2", "--servers", "1",
                                     "--timeout", "120", "--", sys.executable, LOCAL_RANKS_WORKER], timeout=150)
        assert result.returncode == 0, result.stderr
        lines = result.stdout.splitlines()
        for machine in range(2):
            for local_rank in range(2):
                place = {"DMLC_WORKER_ID": str(machine), "BYTEPS_LOCAL_RANK": str(local_rank),
                         "BYTEPS_LOCAL_SIZE": "2"}
                assert f"[worker {machine}.{local_rank}] env {json.dumps(place)}" in lines
                assert f"[worker {machine}.{local_rank}] rank {2 * machine + local_rank} of 4: sum exact" in lines

    @pytest.mark.timeout(180)
    def test_cluster_workers_with_local_size_run_every_process(self):
        layout = dict(DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=str(free_port()), DMLC_NUM_WORKER="2",
                      DMLC_NUM_SERVER="1", DMLC_NODE_HOST="127.0.0.1", BYTEPS_TIMEOUT="60",
                      BYTEPS_JOB_SECRET="the secret of this cluster-mode test job")
        roles = [([], dict(DMLC_ROLE="scheduler")), ([], dict(DMLC_ROLE="server"))]
        roles += [([sys.executable, LOCAL_RANKS_WORKER], dict(DMLC_ROLE="worker", DMLC_WORKER_ID=str(machine),
                                                              BYTEPS_LOCAL_SIZE="2"))
                  for machine in range(2)]
        processes = [subprocess.Popen([bpslaunch_script()] + args, env=clean_env(**layout, **role_env),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      start_new_session=True)
                     for args, role_env in roles]
        results = communicate_all(processes, timeout=120)
        for code, _, err in results:
            assert code == 0, err
        for machine in range(2):
            lines = results[2 + machine][1].splitlines()
            for local_rank in range(2):
                assert f"[worker {machine}.{local_rank}] rank {2 * machine + local_rank} of 4: sum exact" in lines

    @pytest.mark.timeout(180)
    def test_failing_worker_fails_the_job(self):
        worker = python(JOINING_WORKER.format(body="import sys\nif bps.rank() == 1: sys.exit(3)"))
        result = self.run_bpslaunch(["--local", "--workers", "2", "--servers", "1", "--timeout", "120", "--"]
                                    + worker, timeout=150)
        assert result.returncode == 3, result.stderr
        assert "bpslaunch: worker 1 exited with code 3" in result.stderr

    @pytest.mark.timeout(180)
    def test_output_ranks_hides_other_workers_but_not_their_failure(self):
        # No TensorFlow: the core's own API. Rank 0 fails after the job's work, once rank 1 has printed.
        worker = python("""
            import sys
            import bps_tf.numpy as bps
            bps.init()
            rank = bps.rank()
            print(f'rank {rank} says hello', flush=True)
            sys.stderr.write('\\r50%\\r100%\\n')
            bps.shutdown()
            if rank == 0:
                sys.exit('rank 0 failed at the end')
        """)
        # Bytes, not text: text mode would turn the progress bar's \r into \n.
        result = subprocess.run([bpslaunch_script(), "--local", "--workers", "2", "--servers", "1",
                                 "--output-ranks", "1", "--timeout", "120", "--"] + worker, env=clean_env(),
                                capture_output=True, timeout=150)
        out, err = result.stdout.decode(), result.stderr.decode()
        assert result.returncode == 1, err
        assert "[worker 1] rank 1 says hello" in out.splitlines()
        assert "[worker 0]" not in out
        assert "[worker 1] 50%\r[worker 1] 100%\n" in err
        assert "bpslaunch: worker 0 exited with code 1; its output was hidden" in err
        assert "[worker 0] 100%\n[worker 0] rank 0 failed at the end\n" in err

    @pytest.mark.timeout(120)
    def test_ctrl_c_leaves_no_process_behind(self):
        worker = python(JOINING_WORKER.format(body="import time\ntime.sleep(600)"))
        launcher = subprocess.Popen([bpslaunch_script(), "--local", "--workers", "2", "--servers", "1",
                                     "--timeout", "100", "--"] + worker, env=clean_env(),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: len(descendants(launcher.pid)) >= 4, 60, "scheduler, server and workers")
            started = descendants(launcher.pid)
            launcher.send_signal(signal.SIGINT)
            _, err = launcher.communicate(timeout=30)
        finally:
            launcher.kill()
        assert launcher.returncode == 130
        assert "bpslaunch: received SIGINT; stopping all processes" in err
        assert_all_dead(started)

    @pytest.mark.timeout(120)
    def test_timeout_stops_the_job(self):
        worker = python(JOINING_WORKER.format(body="import time\ntime.sleep(600)"))
        result = self.run_bpslaunch(["--local", "--workers", "1", "--servers", "1", "--timeout", "5", "--"]
                                    + worker, timeout=60)
        assert result.returncode == TIMEOUT_EXIT_CODE
        assert "--timeout 5 s" in result.stderr

    @pytest.mark.timeout(60)
    def test_missing_dmlc_role_through_the_console_script(self):
        result = self.run_bpslaunch(["python", "train.py"])
        assert result.returncode == 1
        assert "DMLC_ROLE is not set" in result.stderr and "--local" in result.stderr

    @pytest.mark.timeout(60)
    @pytest.mark.parametrize("role_name", ["scheduler", "server", "worker"])
    def test_incomplete_environment_names_the_missing_variable(self, role_name):
        result = self.run_bpslaunch(["python", "-c", "pass"], DMLC_ROLE=role_name)
        assert result.returncode == 1
        assert re.search(r"^bpslaunch: .*DMLC_\w+", result.stderr, re.MULTILINE), result.stderr

    @pytest.mark.timeout(60)
    def test_sigterm_ends_a_scheduler_blocked_in_the_core(self):
        process = subprocess.Popen([bpslaunch_script()], env=clean_env(
            DMLC_ROLE="scheduler", DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=str(free_port()),
            DMLC_NUM_WORKER="1", DMLC_NUM_SERVER="1", BYTEPS_JOB_SECRET="the secret of this scheduler's test"))
        try:
            time.sleep(2)  # now waiting for workers and servers that never come
            assert process.poll() is None
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=10) == -signal.SIGTERM
        finally:
            process.kill()



class TestElasticServerRestarts:
    @pytest.mark.timeout(30)
    def test_a_server_lost_on_a_machine_without_the_scheduler_is_started_again(self, tmp_path):
        """A cluster node that runs a server and a worker but not the scheduler: its lost server is started
        again (the scheduler elsewhere takes it back), and the node's worker goes on."""
        from bps_tf.launcher.local_job import Launch, Supervisor, WorkerRestarts
        from bps_tf.launcher.output import PrefixedOutput

        failed_once = tmp_path / "failed_once"
        server = python(f"""
            import pathlib, sys, time
            if not pathlib.Path({str(failed_once)!r}).exists():
                pathlib.Path({str(failed_once)!r}).touch()
                sys.exit(1)
            time.sleep(1)
        """)
        worker = python(JOINED + "time.sleep(3); print('trained on')")
        launches = [Launch("server 1", server, dict(os.environ)),
                    Launch("worker 1", worker, dict(os.environ), worker=True)]
        stdout, stderr = io.StringIO(), io.StringIO()
        code = Supervisor(launches, None, 30, 2, PrefixedOutput(stdout, stderr), WorkerRestarts(1)).run()
        assert code == 0, stderr.getvalue()
        assert "bpslaunch: server 1 exited with code 1; starting it again (restart 1 of 1): it rejoins the job" in \
            stderr.getvalue().splitlines(), stderr.getvalue()
        assert "trained on" in stdout.getvalue(), stdout.getvalue()
