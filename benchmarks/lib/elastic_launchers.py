"""The elastic recovery benchmark's job, started in one of two ways: on this host's loopback (one bpslaunch
--local) or on the emulated cluster (on each host, bpslaunch as srun starts it on a node of a SLURM job); and
what the emulated cluster's network counted meanwhile."""

import os
import secrets
import shlex
import signal
import subprocess
import sys
from pathlib import Path

from benchmarks.lib.processes import benchmark_env
from testing.jobs import BPSLAUNCH, free_port

WORKER_MODULE = "benchmarks.workers.elastic_train"


def worker_argv(args, log_dir):
    return [sys.executable, "-m", WORKER_MODULE, "--log-dir", str(log_dir), "--model", args.model,
            "--batch-per-worker", str(args.batch_per_worker), "--commit-settings", args.commit_settings,
            "--segment-steps", str(args.segment_steps), "--rounds", str(args.rounds),
            "--batches-per-commit", str(args.batches_per_commit)]


def elastic_env(args):
    return {"BYTEPS_MIN_WORKERS": str(args.min_workers), "BYTEPS_MAX_WORKERS": str(args.workers)}


class LocalJob:
    """The job on loopback: one bpslaunch --local."""

    def __init__(self, args, log_dir):
        command = [BPSLAUNCH, "--local", "--workers", str(args.workers), "--servers", str(args.servers),
                   "--min-workers", str(args.min_workers), "--max-workers", str(args.workers), "--max-restarts", "1",
                   "--timeout", str(args.timeout), "--", *worker_argv(args, log_dir)]
        self.command = shlex.join(command)
        self.log_path = Path(log_dir) / "bpslaunch.log"
        with open(self.log_path, "w") as log:
            self.launchers = [subprocess.Popen(command, env=benchmark_env(args.env), stdout=log,
                                               stderr=subprocess.STDOUT, start_new_session=True)]

    def logs(self):
        return {"bpslaunch": self.log_path.read_text(errors="replace")}

    def close(self):
        for launcher in self.launchers:
            if launcher.poll() is None:
                os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()


class ClusterJob:
    """The job on the emulated cluster: on each host, bpslaunch as srun starts it on a node of a SLURM job."""

    def __init__(self, args, cluster, log_dir):
        hosts = cluster.hosts
        common = benchmark_env(dict(args.env, **elastic_env(args)))
        common.update(SLURM_JOB_ID=str(os.getpid()), SLURM_JOB_NODELIST=",".join(cluster.address(h) for h in hosts),
                      SLURM_NTASKS=str(len(hosts)), BYTEPS_SERVERS_PER_NODE=str(args.servers // args.workers),
                      DMLC_PS_ROOT_PORT=str(free_port()), BYTEPS_JOB_SECRET=secrets.token_hex(16))
        argv = [BPSLAUNCH, "--max-restarts", "1", *worker_argv(args, log_dir)]
        self.command = shlex.join(argv)
        self.log_dir = Path(log_dir)
        self.launchers = [cluster.popen(host, argv, dict(common, SLURM_NODEID=str(i), SLURM_PROCID=str(i)),
                                        self.log_dir / f"{host}.log") for i, host in enumerate(hosts)]

    def logs(self):
        return {p.stem: p.read_text(errors="replace") for p in sorted(self.log_dir.glob("n*.log"))}

    def close(self):
        pass  # the cluster kills what runs in it


def network_counters(cluster):
    """What TCP had to retransmit on each host (the kernel's counters of its namespace, fresh with it) and
    what the links' rate limiters dropped: each host's egress and the switch's port towards it."""
    def run(ns, *argv):
        return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, timeout=30).stdout

    def dropped(text):
        # `tc -s qdisc show dev X`: "Sent ... (dropped N, overlimits ...)", the root qdisc first
        for line in text.splitlines():
            if "dropped" in line:
                return int(line.split("dropped")[1].split(",")[0])
        return None

    counters = {}
    switch = cluster.namespace("switch")
    for i, host in enumerate(cluster.hosts):
        ns = cluster.namespace(host)
        tables = {}
        for path in ("/proc/net/snmp", "/proc/net/netstat"):
            lines = run(ns, "cat", path).splitlines()
            for names, values in zip(lines[::2], lines[1::2]):
                prefix = names.split(":")[0]
                tables.update({f"{prefix}.{n}": int(v) for n, v in zip(names.split()[1:], values.split()[1:])
                               if v.lstrip("-").isdigit()})
        counters[host] = {"retransmitted_segments": tables.get("Tcp.RetransSegs"),
                          "retransmission_timeouts": tables.get("TcpExt.TCPTimeouts"),
                          "egress_dropped": dropped(run(ns, "tc", "-s", "qdisc", "show", "dev", "eth0")),
                          "switch_port_dropped": dropped(run(switch, "tc", "-s", "qdisc", "show", "dev", f"p{i}"))}
    return counters
