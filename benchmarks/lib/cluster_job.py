"""A bps_tf job on an emulated cluster (netns.EmulatedCluster): the scheduler on a host of its own, each
server on a host of its own (or, with colocate, server i on worker i's host, as many BytePS deployments
do), each worker on its own host; every process started through `bpslaunch` with the DMLC_* variables of
cluster mode, talking over bps_tf's TCP transport (the default). A job given BYTEPS_TRANSPORT=ucx needs
BYTEPS_UCX_TLS=tcp,self as well: between namespaces of one machine UCX would otherwise use shared memory."""

import secrets
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.lib.processes import benchmark_env
from testing.jobs import BPSLAUNCH

_scheduler_ports = iter(range(9100, 9200))  # a fresh port for each job: an earlier job's socket may linger
TF_PORT = 9200  # each worker host's TensorFlow gRPC server (namespaces have their own ports)


def hosts_for(workers, servers, colocate=False):
    return ["sched"] + [f"w{i}" for i in range(workers)] + ([] if colocate else [f"s{i}" for i in range(servers)])


def server_host(i, workers, colocate):
    return f"w{i % workers}" if colocate else f"s{i}"


def tf_cluster(cluster, workers):
    """host:port of each worker's TF server, for MultiWorkerMirroredStrategy's TF_CONFIG."""
    return ",".join(f"{cluster.address(f'w{i}')}:{TF_PORT}" for i in range(workers))


def measure_link(cluster, sender, receiver, nbytes=64 << 20):
    """Raw TCP goodput from `sender` to `receiver`, bytes/s."""
    env = benchmark_env()
    argv = [sys.executable, "-m", "benchmarks.workers.link_check"]
    serve = subprocess.Popen(["ip", "netns", "exec", cluster.namespace(receiver), *argv, "serve", "9300",
                              str(nbytes)], env=env, stdout=subprocess.PIPE, text=True)
    try:
        subprocess.run(["ip", "netns", "exec", cluster.namespace(sender), *argv, "send", cluster.address(receiver),
                        "9300", str(nbytes)], env=env, check=True, timeout=120)
        out, _ = serve.communicate(timeout=60)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
    return float(out.strip())


def _tail(path, lines=30):
    text = Path(path).read_text(errors="replace").splitlines()
    return "\n".join(text[-lines:])


def _roles_tail(log_dir):
    """The end of the scheduler's and servers' logs, when there are any: a failed worker may be their fault."""
    logs = sorted(Path(log_dir).glob("s*.log"))
    return "".join(f"\n--- {log.stem}:\n{_tail(log, 10)}" for log in logs)


def wait_all(running, log_dir, timeout):
    """Waits for every process of {name: Popen}; raises with the first failure's log tail (or on timeout)."""
    deadline = time.monotonic() + timeout
    while any(p.poll() is None for p in running.values()):
        failed = [name for name, p in running.items() if p.poll() not in (None, 0)]
        if failed or time.monotonic() > deadline:
            name = failed[0] if failed else next(n for n, p in running.items() if p.poll() is None)
            why = f"exited with {running[name].returncode}" if failed else f"still running after {timeout} s"
            raise RuntimeError(f"{name} {why}:\n{_tail(Path(log_dir) / f'{name}.log')}{_roles_tail(log_dir)}")
        time.sleep(0.2)
    failed = [name for name, p in running.items() if p.returncode != 0]
    if failed:
        raise RuntimeError(f"{failed[0]} failed:\n{_tail(Path(log_dir) / f'{failed[0]}.log')}")


def run_plain(cluster, workers, argv, log_dir, extra_env=(), timeout=600):
    """Runs argv(i) on each worker host without a bps_tf job (TF's own strategy, or no communication)."""
    env = benchmark_env(extra_env)
    running = {f"worker{i}": cluster.popen(f"w{i}", argv(i), dict(env, DMLC_WORKER_ID=str(i)),
                                           Path(log_dir) / f"worker{i}.log") for i in range(workers)}
    wait_all(running, log_dir, timeout)


def run_job(cluster, workers, servers, worker_argv, log_dir, extra_env=(), timeout=600, colocate=False):
    """Runs the job; worker_argv(i) is worker i's command. Raises with the logs' tails when a process fails."""
    common = benchmark_env(extra_env)
    common.update(DMLC_PS_ROOT_URI=cluster.address("sched"), DMLC_PS_ROOT_PORT=str(next(_scheduler_ports)),
                  DMLC_NUM_WORKER=str(workers), DMLC_NUM_SERVER=str(servers),
                  BYTEPS_JOB_SECRET=secrets.token_hex(16))
    log_dir = Path(log_dir)

    def start(name, host, role, argv, **more):
        env = dict(common, DMLC_ROLE=role, DMLC_NODE_HOST=cluster.address(host), **more)
        return cluster.popen(host, [BPSLAUNCH, *argv], env, log_dir / f"{name}.log")

    others = [start("scheduler", "sched", "scheduler", [])]
    others += [start(f"server{i}", server_host(i, workers, colocate), "server", []) for i in range(servers)]
    running = {f"worker{i}": start(f"worker{i}", f"w{i}", "worker", worker_argv(i), DMLC_WORKER_ID=str(i))
               for i in range(workers)}
    wait_all(running, log_dir, timeout)
    for p in others:  # they stop once every worker finished
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
