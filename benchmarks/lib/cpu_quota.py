"""A CPU quota for one process tree (a straggler on a shared machine): a cgroup (v1 `cpu` controller) whose
CFS quota allows `cores` CPUs' worth of time per period; `wrap(argv)` starts argv inside it. A process in a
network namespace (`ip netns exec`) sees a /sys of its own, without the cgroups: the wrapped command writes
its pid to a file and waits until this process has moved it into the group. The quota applies once the file
`start_mark` exists: the wrapped command finds its name in BENCH_STARTED_MARK and creates it after its first
step, so that importing TensorFlow and tracing the step are not slowed."""

import os
import shutil
import tempfile
import threading
import time
import uuid
from pathlib import Path

CPU_CONTROLLER = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 100_000


class CpuQuota:
    def __init__(self, cores, start_timeout=120):
        self.cores = cores
        self.start_timeout = start_timeout
        self.group = None
        self.start_mark = None
        self.error = None

    def __enter__(self):
        if self.cores is None:
            return self
        if not (CPU_CONTROLLER / "cpu.cfs_quota_us").exists():
            raise RuntimeError(f"a CPU quota needs the cgroup v1 cpu controller at {CPU_CONTROLLER}")
        self.group = CPU_CONTROLLER / f"bps_tf_straggler_{uuid.uuid4().hex[:8]}"
        self.group.mkdir()
        (self.group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        self._handshake = Path(tempfile.mkdtemp(prefix="bps_tf_quota_"))
        self.start_mark = str(self._handshake / "started")
        self._mover = threading.Thread(target=self._move_when_started, daemon=True)
        self._mover.start()
        return self

    def wrap(self, argv):
        """argv, started inside the group (its threads and children with it)."""
        if self.group is None:
            return argv
        pid, go = self._handshake / "pid", self._handshake / "go"
        join = (f'echo $$ > {pid}.new && mv {pid}.new {pid} && while [ ! -e {go} ]; do sleep 0.05; done && '
                f'export BENCH_STARTED_MARK={self.start_mark} && exec "$@"')
        return [shutil.which("sh") or "/bin/sh", "-c", join, "sh", *argv]

    def _move_when_started(self):
        pid, deadline = self._handshake / "pid", time.monotonic() + self.start_timeout
        while not pid.exists():
            if time.monotonic() > deadline or self.group is None:
                return  # the wrapped command never started; its job fails on its own
            time.sleep(0.05)
        try:
            (self.group / "cgroup.procs").write_text(pid.read_text().strip())
        except OSError as error:
            self.error = f"could not move the straggler into {self.group}: {error}"
        (self._handshake / "go").touch()  # the command goes on; uncapped, its run is refused at the end
        while not Path(self.start_mark).exists():
            if self.group is None:
                return
            time.sleep(0.05)
        (self.group / "cpu.cfs_quota_us").write_text(str(max(1000, int(self.cores * PERIOD_US))))

    def __exit__(self, *exc):
        if self.group is None:
            return
        group, self.group = self.group, None
        self._mover.join(timeout=5)
        moved = (group / "cgroup.procs").read_text().split()
        for pid in moved:
            try:
                (CPU_CONTROLLER / "cgroup.procs").write_text(pid)  # back to the root group
            except OSError:
                pass  # exited meanwhile
        os.rmdir(group)
        shutil.rmtree(self._handshake, ignore_errors=True)
        if self.error and exc[0] is None:
            raise RuntimeError(self.error)
