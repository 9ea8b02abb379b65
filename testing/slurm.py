"""A real SLURM cluster on this machine for tests: munge, slurmctld and one slurmd per node, each node a network
namespace of its own with its own node name and address, so that bpslaunch sees a multi-node job exactly as on
a cluster (`SLURM_JOB_NODELIST=bpsnode[0-1]`, one srun task per node). Node 0's namespace holds a bridge that
links the others and also runs slurmctld; `sbatch`, `sacct` and friends run there too.

The configuration lives in a temporary folder: process tracking through /proc and no task plugin, so no
cgroup is needed; job completion records in a text file, which `sacct --completion` reads (SLURM 22.05 has
no text-file accounting storage, and full accounting needs slurmdbd with a database). Needs root (the daemons,
ip netns). Every daemon, job process, namespace and file made here is removed on stop(), also after a failure.
"""

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

NAMESPACE_PREFIX = "bpsslurm-"
SUBNET = "10.214.0"  # node i is 10.214.0.(i+1)/24, inside these namespaces only
NODE_PREFIX = "bpsnode"
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "sacct", "sinfo", "scancel", "squeue")
PACKAGES = "munge slurmctld slurmd slurm-client"
FINAL_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED")


def why_unavailable():
    """Why a SLURM cluster cannot start here, or None when it can."""
    if os.geteuid() != 0:
        return "SLURM's daemons and the nodes' network namespaces need root"
    missing = [tool for tool in DAEMONS + ("ip",) if shutil.which(tool) is None]
    if missing:
        return f"{', '.join(missing)} not installed (apt-get install {PACKAGES}; scripts/setup_slurm.sh)"
    probe = f"{NAMESPACE_PREFIX}{os.getpid()}-probe"
    added = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True, timeout=30)
    if added.returncode != 0:
        return f"cannot create network namespaces here: {added.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, timeout=30)
    return None


def _run(*argv, timeout=30):
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {(done.stderr or done.stdout).strip()}")
    return done.stdout


def _owner_is_gone(namespace):
    pid = namespace[len(NAMESPACE_PREFIX):].split("-")[0]
    return pid.isdigit() and not os.path.exists(f"/proc/{pid}")


def _namespace_processes(namespace):
    listed = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True, timeout=30)
    return [int(pid) for pid in listed.stdout.split()]


def _delete_namespace(namespace, timeout=10):
    """Kills what is left in `namespace` (job processes outlive a stopped slurmd), waits for it, deletes it."""
    deadline = time.monotonic() + timeout
    while (pids := _namespace_processes(namespace)) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    subprocess.run(["ip", "netns", "del", namespace], capture_output=True, timeout=30)
    shutil.rmtree(f"/etc/netns/{namespace}", ignore_errors=True)


def delete_stale_namespaces():
    """Namespaces of earlier runs whose test process was killed before it could clean up."""
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
    for line in listing.splitlines():
        name = line.split()[0] if line.split() else ""
        if name.startswith(NAMESPACE_PREFIX) and _owner_is_gone(name):
            _delete_namespace(name)


class SlurmCluster:
    """`nodes` SLURM nodes named bpsnode0.. on this machine. Use as a context manager, or start() and stop()."""

    def __init__(self, nodes=2):
        self.nodes = nodes
        self.node_names = [f"{NODE_PREFIX}{i}" for i in range(nodes)]
        self.namespaces = [f"{NAMESPACE_PREFIX}{os.getpid()}-{i}" for i in range(nodes)]
        self.folder = None
        self._daemons = []

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    @property
    def conf(self):
        return self.folder / "slurm.conf"

    def start(self, timeout=60):
        delete_stale_namespaces()
        self.folder = Path(tempfile.mkdtemp(prefix="bps-slurm-"))
        try:
            self._make_network()
            self._start_munge()
            self._write_configuration()
            self._daemon("slurmctld", 0, "slurmctld", "-D", "-f", str(self.conf))
            for i, name in enumerate(self.node_names):
                self._daemon(f"slurmd-{name}", i, "slurmd", "-D", "-f", str(self.conf), "-N", name)
            self._wait_until_idle(timeout)
        except BaseException:
            self.stop()
            raise

    def _make_network(self):
        hostname = os.uname().nodename
        for i, namespace in enumerate(self.namespaces):
            _run("ip", "netns", "add", namespace)
            # `ip netns exec` mounts this over /etc/hosts: node names resolve as on a cluster, and this
            # machine's name is each node's own address (srun gives its host name to the nodes it starts).
            hosts = Path(f"/etc/netns/{namespace}")
            hosts.mkdir(parents=True, exist_ok=True)
            lines = ["127.0.0.1 localhost"] + [f"{self.address(j)} {n}" for j, n in enumerate(self.node_names)]
            (hosts / "hosts").write_text("\n".join(lines + [f"{self.address(i)} {hostname}", ""]))
            _run("ip", "-n", namespace, "link", "set", "lo", "up")
        hub = self.namespaces[0]
        _run("ip", "-n", hub, "link", "add", "bps-br", "type", "bridge")
        _run("ip", "-n", hub, "addr", "add", f"{self.address(0)}/24", "dev", "bps-br")
        _run("ip", "-n", hub, "link", "set", "bps-br", "up")
        for i, namespace in enumerate(self.namespaces[1:], start=1):
            _run("ip", "-n", hub, "link", "add", f"bps-port{i}", "type", "veth", "peer", "name", "bps-eth0",
                 "netns", namespace)
            _run("ip", "-n", hub, "link", "set", f"bps-port{i}", "master", "bps-br", "up")
            _run("ip", "-n", namespace, "addr", "add", f"{self.address(i)}/24", "dev", "bps-eth0")
            _run("ip", "-n", namespace, "link", "set", "bps-eth0", "up")

    @staticmethod
    def address(node):
        return f"{SUBNET}.{node + 1}"

    def _start_munge(self):
        munge = self.folder / "munge"
        munge.mkdir(mode=0o700)
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        # --force: munged refuses root and shared folders otherwise; this one is private to the tests.
        self._daemon("munged", None, "munged", "--foreground", "--force", f"--socket={munge / 'socket'}",
                     f"--key-file={key}", f"--log-file={munge / 'log'}", f"--pid-file={munge / 'pid'}",
                     f"--seed-file={munge / 'seed'}")
        deadline = time.monotonic() + 20
        while not (munge / "socket").exists():
            if time.monotonic() > deadline:
                raise RuntimeError(f"munged did not start: {self._log('munged')}")
            time.sleep(0.1)

    def _write_configuration(self):
        folder = self.folder
        for name in self.node_names:
            (folder / name).mkdir()
        (folder / "state").mkdir()
        nodes = "\n".join(f"NodeName={name} NodeAddr={self.address(i)} CPUs={os.cpu_count()} State=UNKNOWN"
                          for i, name in enumerate(self.node_names))
        self.conf.write_text(f"""\
ClusterName=bps-test
SlurmctldHost={os.uname().nodename}({self.address(0)})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={folder}/munge/socket
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/%n
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/%n/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/%n/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={folder}/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
KillWait=5
{nodes}
PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
        # slurmd loads a cgroup plugin at start even when nothing uses it; naming v1 skips the detection that
        # fails where /sys/fs/cgroup is not mounted (inside `ip netns exec`).
        (folder / "cgroup.conf").write_text("CgroupPlugin=cgroup/v1\n")

    def _log(self, name):
        path = self.folder / f"{name}.out"
        return path.read_text()[-3000:] if path.exists() else ""

    def _daemon(self, name, node, *argv):
        command = list(argv) if node is None else ["ip", "netns", "exec", self.namespaces[node], *argv]
        with open(self.folder / f"{name}.out", "w") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True)
        self._daemons.append((name, process))

    def command(self, *argv, timeout=60, check=True, env=None):
        """Runs a SLURM client command (sbatch, sacct, ...) on node 0; returns its output."""
        full_env = dict(env if env is not None else os.environ)
        full_env["SLURM_CONF"] = str(self.conf)
        done = subprocess.run(["ip", "netns", "exec", self.namespaces[0], *argv], capture_output=True, text=True,
                              timeout=timeout, env=full_env)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed: {(done.stderr or done.stdout).strip()}")
        return done.stdout

    def _wait_until_idle(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            for name, process in self._daemons:
                if process.poll() is not None:
                    raise RuntimeError(f"{name} exited with code {process.returncode}: {self._log(name)}")
            states = self.command("sinfo", "-h", "-N", "-o", "%N %t", check=False).split()
            if states.count("idle") == self.nodes:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"SLURM's nodes are not idle after {timeout} s ({states}); slurmd said: "
                                   f"{self._log('slurmd-' + self.node_names[0])}")
            time.sleep(0.3)

    def submit(self, script, *args, options=(), env=None, cwd=None):
        """sbatch `script` with `args`; returns the job id. Its output goes to output(job_id)."""
        argv = ["sbatch", "--parsable", f"--output={self.folder}/job-%j.out", *options]
        if cwd is not None:
            argv.append(f"--chdir={cwd}")
        out = self.command(*argv, str(script), *map(str, args), env=env)
        return int(re.match(r"\s*(\d+)", out).group(1))

    def state(self, job_id):
        """The job's state from its completion record (sacct --completion), None while it has none."""
        out = self.command("sacct", "--completion", "-j", str(job_id), "-n", "-P", "-o", "JobID,State",
                           check=False)
        for line in out.splitlines():
            fields = line.strip().split("|")
            if len(fields) == 2 and fields[0] == str(job_id):
                return fields[1].split()[0]
        return None

    def steps(self, job_id):
        """{step name: step id ("JOB.STEP")} of the job's running steps (squeue --steps)."""
        out = self.command("squeue", "--steps", "-h", "-j", str(job_id), "-o", "%i %j", check=False)
        return {fields[1]: fields[0] for fields in (line.split() for line in out.splitlines()) if len(fields) == 2}

    def wait_for_step(self, job_id, name, timeout=60):
        """The id of the job's running step called `name`, once there is one."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            step = self.steps(job_id).get(name)
            if step is not None:
                return step
            time.sleep(0.2)
        raise TimeoutError(f"job {job_id} has no step {name!r} after {timeout} s: {self.steps(job_id)}; its output:\n"
                           f"{self.output(job_id)[-3000:]}")

    def wait(self, job_id, timeout):
        """Waits until the job has ended; returns its final state. Cancels it if it runs past `timeout`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.state(job_id)
            if state in FINAL_STATES:
                return state
            time.sleep(1)
        self.command("scancel", str(job_id), check=False)
        raise TimeoutError(f"SLURM job {job_id} did not end within {timeout} s; its output:\n"
                           f"{self.output(job_id)[-3000:]}")

    def output(self, job_id):
        path = self.folder / f"job-{job_id}.out"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self):
        if self._daemons and any(name == "slurmctld" and p.poll() is None for name, p in self._daemons):
            self.command("scancel", "--full", "--user=root", check=False)
        for name, process in reversed(self._daemons):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        self._daemons = []
        for namespace in self.namespaces:
            _delete_namespace(namespace)
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
