"""Strangers and lying members against a running job (docs/security.md). Each case runs against a job of 2
workers and 2 servers whose workers check every sum; it holds when no process of the job died and every
sum stayed exact."""

import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testing import attacks, wire
from testing.jobs import BPSLAUNCH, ManualJob, clean_env
from tests.reliability.harness import Case, Outcome, error_line


def against_a_running_job(attack, transport="tcp"):
    """Runs `attack(job, ports, secret)` (returning a line to report) while the job sums; checks the job."""
    def run():
        stop = Path(tempfile.mkdtemp()) / "stop"
        started = time.monotonic()
        with ManualJob(2, 2, "steady_sums.py", stop, BYTEPS_TIMEOUT=30, BYTEPS_TRANSPORT=transport) as job:
            ports = attacks.wait_for_listeners(job, ["scheduler", "server0", "server1"])
            time.sleep(1)
            line = attack(job, ports, job.base["BYTEPS_JOB_SECRET"])
            time.sleep(1)
            dead = [name for name, p in job.processes.items() if p.poll() is not None]
            if dead:
                last = job.output(dead[0]).strip().splitlines() or [""]
                return Outcome(False, f"{line}; {', '.join(dead)} died: {last[-1][:120]}", time.monotonic() - started)
            stop.touch()
            outs = [job.wait(f"worker{r}", timeout=60)[1] for r in range(2)]
        exact = all("steps exact" in out for out in outs) and "NOT " not in line
        if not exact:
            failing = next((out for out in outs if "steps exact" not in out), "")
            last = [l for l in failing.strip().splitlines() if not l.startswith("[bps")] or [""]
            line = f"{line}; a worker failed: {last[-1][:200]}"
        return Outcome(exact, line, time.monotonic() - started)
    return run


def raw_bytes(data, target):
    def attack(job, ports, secret):
        for _ in range(5):
            attacks.send_and_close(ports[target], data)
        return f"{len(data)} bytes x5 to the {target}: job went on"
    return attack


def fuzz(job, ports, secret):
    cases = attacks.fuzz(list(ports.values()), secret, 10, random.Random(7))
    return f"{cases} random and mutated inputs in 10 s: job went on"


def wrong_secret(job, ports, secret):
    with wire.connect(ports["scheduler"]) as sock:
        accepted = wire.handshake(sock, "a guess at the secret, long")
    return "rejected" if not accepted else "ACCEPTED"


def second_job(job, ports, secret):
    layout = {k: v for k, v in job.base.items() if k.startswith("DMLC_")}
    other = subprocess.run([BPSLAUNCH], env=clean_env(**layout, DMLC_ROLE="server",
                                                      BYTEPS_JOB_SECRET="another job's own secret"),
                           capture_output=True, text=True, timeout=60)
    return error_line(other.stderr) if "rejected" in other.stderr else "NOT REJECTED: " + other.stderr[-100:]


def late_worker(job, ports, secret):
    layout = {k: v for k, v in job.base.items() if k.startswith(("DMLC_", "BYTEPS_"))}
    late = subprocess.run([BPSLAUNCH, sys.executable, "-c", "import bps_tf.numpy as b; b.init()"],
                          env=clean_env(**layout, DMLC_ROLE="worker", DMLC_WORKER_ID=0), capture_output=True,
                          text=True, timeout=60)
    return error_line(late.stderr) if "after the job started" in late.stderr else "NOT TURNED AWAY: " + late.stderr[-100:]


def impersonation(job, ports, secret):
    """A member without the scheduler's token pushes as worker 1 to every server, over and over."""
    answers = 0
    for port in (ports["server0"], ports["server1"]):
        with wire.connect(port) as sock:
            assert wire.handshake(sock, secret)
            for key in range(0, 2**20 * 64, 2**20):
                sock.sendall(wire.frame(wire.message("PUSH", sender=1, participants=2, num_elements=1, round_=1,
                                                     key=key), b"\0\0\x80\x49"))  # 1e6 as float32
            sock.settimeout(0.5)
            try:
                answers += len(sock.recv(65536))
            except socket.timeout:
                pass
    return f"pushes as worker 1 without its token: {answers} bytes of answer"


def orders_from_a_member(job, ports, secret):
    for port in (ports["server0"], ports["server1"]):
        with wire.connect(port) as sock:
            assert wire.handshake(sock, secret)
            for kind in ("ABORT", "SHUTDOWN", "RESET"):
                sock.sendall(wire.frame(wire.message(kind, code=5, text=b"stop now")))
            time.sleep(0.2)
    return "ABORT, SHUTDOWN and RESET from a member to both servers: ignored"


def idle_connections(job, ports, secret):
    sockets = [wire.connect(ports[name]) for name in ("scheduler", "server0", "server1") for _ in range(70)]
    time.sleep(2)
    for sock in sockets:
        sock.close()
    return f"{len(sockets)} connections that never prove anything: job went on"


def reopening_strangers(job, ports, secret):
    """More strangers than places for unproven connections at two ports, each back as soon as it is closed."""
    targets = [ports["scheduler"], ports["server0"]]
    with attacks.Strangers(targets, 2000) as strangers:
        strangers.wait_until_each_was_open()
        time.sleep(0.5)
        slowest = max(attacks.member_handshake_seconds(port, secret) for port in targets)
    line = f"a member in after {slowest:.2f} s at most; {strangers.closed} strangers' connections closed"
    return line if slowest < 2 else "NOT within 2 s: " + line


def ucx_listener_bytes():
    """UCX's own connection manager on the scheduler's port (BYTEPS_TRANSPORT=ucx)."""
    def attack(job, ports, secret):
        attacks.send_and_close(int(job.base["DMLC_PS_ROOT_PORT"]), b"\0" * 1000)  # UCX's listener
        time.sleep(1)
        return "scheduler alive" if job.processes["scheduler"].poll() is None else "scheduler aborted (UCX)"
    return attack


CASES = [
    Case("attack", "1000 zero bytes to the scheduler's port", "turned away; the job goes on",
         against_a_running_job(raw_bytes(b"\0" * 1000, "scheduler"))),
    Case("attack", "512 bytes of 0xFF to the scheduler's port", "turned away; the job goes on",
         against_a_running_job(raw_bytes(b"\xff" * 512, "scheduler"))),
    Case("attack", "1000 zero bytes to a server's port", "turned away; the job goes on",
         against_a_running_job(raw_bytes(b"\0" * 1000, "server0"))),
    Case("attack", "512 bytes of 0xFF to a server's port", "turned away; the job goes on",
         against_a_running_job(raw_bytes(b"\xff" * 512, "server1"))),
    Case("attack", "random and mutated frames, with and without a valid proof (fuzz)", "no process dies, sums exact",
         against_a_running_job(fuzz)),
    Case("attack", "a connection with a wrong secret", "rejected at the handshake; the job goes on",
         against_a_running_job(wrong_secret)),
    Case("attack", "a server of another job (another secret) on the same scheduler port",
         "it is rejected and stops; the job goes on", against_a_running_job(second_job)),
    Case("attack", "a late worker with the job's secret", "turned away with the reason; the job goes on",
         against_a_running_job(late_worker)),
    Case("attack", "a member pushes as worker 1 without its token", "dropped without an answer; sums exact",
         against_a_running_job(impersonation)),
    Case("attack", "a member sends ABORT, SHUTDOWN and RESET to the servers", "ignored: only the scheduler gives them",
         against_a_running_job(orders_from_a_member)),
    Case("attack", "210 connections that never complete the handshake", "dropped after 3 s; the job goes on",
         against_a_running_job(idle_connections)),
    Case("attack", "1000 strangers at the scheduler's port and 1000 at a server's (silent, one byte, garbage), each "
         "connection opened again as soon as it is closed", "a member gets in within 2 s at each; the job goes on",
         against_a_running_job(reopening_strangers)),
    Case("attack", "1000 zero bytes to the scheduler of a UCX job (BYTEPS_TRANSPORT=ucx)",
         "UCX's own connection manager aborts the process: UCX jobs belong on trusted fabrics (docs/security.md)",
         against_a_running_job(ucx_listener_bytes(), transport="ucx")),
]
