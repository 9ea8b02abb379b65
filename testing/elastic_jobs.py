"""Elastic jobs for tests and benchmarks: a `bpslaunch --local` job whose worker processes can be found, killed,
frozen and watched (each worker logs its completed steps), and extra workers started beside it."""

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testing.jobs import BPSLAUNCH, WORKERS_DIR, clean_env


def processes_with(marker):
    """{pid: environment} of this user's processes whose command line contains `marker`."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if marker not in command:
                continue
            pairs = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile, or not ours
        env = dict(p.decode(errors="replace").split("=", 1) for p in pairs if b"=" in p)
        found[int(entry.name)] = env
    return found


def resident_kib(pid):
    """VmRSS of process `pid`, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def open_files(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


class ElasticJob:
    """`bpslaunch --local` of an elastic job running tests/workers/<script> with `script_args`, in which
    "{log_dir}" stands for the job's log directory (every worker must get it: its processes are found by it).
    The launcher's output goes to a file."""

    def __init__(self, script, script_args, workers, servers, min_workers, max_workers, max_restarts=0,
                 timeout=300, **env):
        self._directory = tempfile.TemporaryDirectory(prefix="bps_tf_elastic_")
        self.log_dir = Path(self._directory.name)
        self.output_path = self.log_dir / "bpslaunch.log"
        self.script = str(WORKERS_DIR / script)
        self.args = [str(a).replace("{log_dir}", str(self.log_dir)) for a in script_args]
        command = [BPSLAUNCH, "--local", "--workers", str(workers), "--servers", str(servers), "--min-workers",
                   str(min_workers), "--max-workers", str(max_workers), "--max-restarts", str(max_restarts),
                   "--timeout", str(timeout), "--", sys.executable, self.script, *self.args]
        self.env = clean_env(**env)
        self._output = open(self.output_path, "w")
        self.launcher = subprocess.Popen(command, env=self.env, stdout=self._output, stderr=subprocess.STDOUT,
                                         text=True, start_new_session=True)
        self._extra = []

    def role_pids(self, role):
        """Pids of the job's processes of DMLC_ROLE `role` (scheduler, server, worker)."""
        port = self.port()
        return sorted(pid for pid, env in processes_with("bps_tf.launcher.role").items()
                      if env.get("DMLC_ROLE") == role and env.get("DMLC_PS_ROOT_PORT") == port) if port else []

    def port(self):
        for env in self._worker_processes().values():
            return env.get("DMLC_PS_ROOT_PORT")
        return None

    def _worker_processes(self):
        # The job's log directory is in every worker's command line (and bpslaunch's, which has no worker id).
        return {pid: env for pid, env in processes_with(str(self.log_dir)).items() if "DMLC_WORKER_ID" in env}

    def workers(self):
        """{worker id: pid} of the workers running now."""
        return {int(env["DMLC_WORKER_ID"]): pid for pid, env in self._worker_processes().items()}

    def wait_for_workers(self, ids, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            running = self.workers()
            if all(i in running for i in ids):
                return running
            time.sleep(0.1)
        raise AssertionError(f"workers {ids} not running within {timeout} s\n{self.output()[-4000:]}")

    def steps(self, worker_id):
        """The steps worker `worker_id` logged (every process of that place), each as (time, *numbers):
        elastic_keras.py's (time, epoch, batch, size), elastic_sums.py's (time, step, size)."""
        path = self.log_dir / f"steps.{worker_id}"
        if not path.exists():
            return []
        rows = []
        for line in path.read_text().split("\n")[:-1]:  # whole lines only: the last may be being written
            parts = line.split()
            if len(parts) >= 2:
                rows.append((float(parts[0]), *(int(p) for p in parts[1:])))
        return rows

    def wait_for_step(self, worker_id, condition, timeout=120):
        """The first logged step of `worker_id` for which condition(step) holds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for step in self.steps(worker_id):
                if condition(step):
                    return step
            if self.launcher.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"worker {worker_id} logged no such step within {timeout} s\n{self.output()[-4000:]}")

    def signal(self, worker_id, signum):
        pid = self.workers()[worker_id]
        os.kill(pid, signum)
        return time.time()

    def start_worker(self, worker_id):
        """A worker process beyond bpslaunch's (a new machine, say), in the same job."""
        env = dict(next(iter(self._worker_processes().values())))
        env["DMLC_WORKER_ID"] = str(worker_id)
        env.pop("BPSLAUNCH_JOINED_FILE", None)  # that worker's, whom bpslaunch would take as joined
        output = open(self.log_dir / f"extra.{worker_id}.log", "w")
        process = subprocess.Popen([sys.executable, self.script, *self.args], env=env, stdout=output,
                                   stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self._extra.append((process, output))
        return process

    def extra_output(self, worker_id):
        return (self.log_dir / f"extra.{worker_id}.log").read_text(errors="replace")

    def wait(self, timeout):
        try:
            self.launcher.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the job still runs after {timeout} s\n{self.output()[-6000:]}") from None
        for process, _ in self._extra:
            process.wait(timeout=60)
        return self.launcher.returncode, self.output()

    def output(self):
        self._output.flush()
        return self.output_path.read_text(errors="replace")

    def close(self):
        for process, output in self._extra:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            output.close()
        if self.launcher.poll() is None:
            try:
                os.killpg(self.launcher.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.launcher.wait()
        # Processes the launcher started die with it (PR_SET_PDEATHSIG); a frozen one needs SIGCONT to die.
        for pid in self._worker_processes():
            try:
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._output.close()
        self._directory.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
