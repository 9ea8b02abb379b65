"""A CPU quota for one process tree (a straggler on a shared machine): a cgroup (v1 `cpu` controller) whose
CFS quota allows `cores` CPUs' worth of time per period; `wrap(argv)` starts argv inside it."""

import os
import shutil
import uuid
from pathlib import Path

CPU_CONTROLLER = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 100_000


class CpuQuota:
    def __init__(self, cores):
        self.cores = cores
        self.group = None

    def __enter__(self):
        if self.cores is None:
            return self
        if not (CPU_CONTROLLER / "cpu.cfs_quota_us").exists():
            raise RuntimeError(f"a CPU quota needs the cgroup v1 cpu controller at {CPU_CONTROLLER}")
        self.group = CPU_CONTROLLER / f"bps_tf_straggler_{uuid.uuid4().hex[:8]}"
        self.group.mkdir()
        (self.group / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (self.group / "cpu.cfs_quota_us").write_text(str(max(1000, int(self.cores * PERIOD_US))))
        return self

    def wrap(self, argv):
        """argv, started inside the group (its threads and children with it)."""
        if self.group is None:
            return argv
        join = f'echo $$ > {self.group / "cgroup.procs"} && exec "$@"'
        return [shutil.which("sh") or "/bin/sh", "-c", join, "sh", *argv]

    def __exit__(self, *exc):
        if self.group is not None:
            for pid in (self.group / "cgroup.procs").read_text().split():
                try:
                    (CPU_CONTROLLER / "cgroup.procs").write_text(pid)  # back to the root group
                except OSError:
                    pass  # exited meanwhile
            os.rmdir(self.group)
