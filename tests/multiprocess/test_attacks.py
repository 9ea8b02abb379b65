"""A running job against strangers and lying members (docs/security.md): raw garbage, wrong secrets, random
and mutated frames with and without a valid proof, misconfigured, late and foreign processes. No process of
the job dies, every sum stays exact, and each turned-away process is told why."""

import random
import socket
import struct
import subprocess
import sys
import time

import pytest

import wire
from jobs import BPSLAUNCH, ManualJob, clean_env

FUZZ_SECONDS = 12


def wait_for_listeners(job, names, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ports = {name: wire.listening_ports(job.processes[name].pid) for name in names}
        if all(ports.values()):
            return {name: found[0] for name, found in ports.items()}
        time.sleep(0.1)
    raise AssertionError(f"{names} did not listen within {timeout} s")


def send_and_close(port, data, secret=None):
    """Connects, optionally proves `secret`, sends `data`, reads what comes back for a moment, closes."""
    try:
        with wire.connect(port, timeout=2) as sock:
            if secret is not None and not wire.handshake(sock, secret):
                return
            sock.sendall(data)
            sock.settimeout(0.05)
            try:
                while sock.recv(65536):
                    pass
            except (socket.timeout, OSError):
                pass
    except (ConnectionError, OSError):
        pass  # the peer closed on us: that is allowed, dying is not


def random_message(rng):
    """A well-formed message with arbitrary field values, of any type."""
    big = [0, 1, 7, 2**31 - 1, 2**32, 2**40, 2**62 + 1, 2**64 - 1]
    return wire.message(
        rng.randint(1, len(wire.TYPES) + 2), sender=rng.choice([-1, 0, 1, 2, 2**31 - 1]),
        request_id=rng.choice(big), key=rng.choice(big), round_=rng.choice([0, 1, 2, 2**32 - 1]),
        dtype=rng.randint(0, 5), num_elements=rng.choice(big), participants=rng.choice([0, 1, 2, 3, -1]),
        zeros=rng.randint(0, 1), echo=rng.randint(0, 1), share=rng.randint(0, 2), in_shared=rng.randint(0, 1),
        shared_result=rng.choice(big), shared_receive=rng.choice(big), code=rng.randint(0, 8),
        text=bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 4, 40, 300]))))


def mutated(data, rng):
    data = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        data[rng.randrange(len(data))] = rng.getrandbits(8)
    return bytes(data)


def fuzz(ports, secret, seconds, rng):
    """Random and mutated input, with and without a valid proof, at every port, for `seconds`."""
    valid = [wire.message("REGISTER", text=wire.register_body(2, 0, 0, 1, 2, 2, "127.0.0.1:1")),
             wire.message("DECLARE", sender=0, text=wire.tensor_spec("small", wire.FLOAT32, [1000])),
             wire.message("PUSH", sender=1, participants=2, num_elements=1000, round_=1, key=12345),
             wire.message("IDENTIFY", sender=0, text=b"x" * 32),
             wire.message("ABORT", code=5, text=b"job over"), wire.message("FINISH", sender=0),
             wire.message("ABORT_REQUEST", sender=0, text=b"stop")]
    cases = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        port = rng.choice(ports)
        kind = cases % 6
        if kind == 0:  # garbage before any proof
            data = rng.choice([b"\0" * 1000, b"\xff" * 512, bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 4096)))])
            send_and_close(port, data)
        elif kind == 1:  # a wrong secret
            send_and_close(port, b"", secret="not the job's secret, but long")
        elif kind == 2:  # a member sending random bytes
            send_and_close(port, bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 2048))), secret)
        elif kind == 3:  # a member sending well-formed messages with arbitrary fields
            send_and_close(port, b"".join(wire.frame(random_message(rng)) for _ in range(20)), secret)
        elif kind == 4:  # a member sending mutated real messages, and payloads that lie about their length
            frames = [wire.frame(mutated(rng.choice(valid), rng)) for _ in range(10)]
            frames.append(struct.pack("<IQ", rng.choice([0, 5, 2**31]), rng.choice([0, 2**40, 2**63])))
            send_and_close(port, b"".join(frames), secret)
        else:  # a member replaying real messages: orders only the scheduler may give, pushes for others
            send_and_close(port, b"".join(wire.frame(m) for m in valid), secret)
        cases += 1
    return cases


def run_bpslaunch(env, *command, timeout=60):
    return subprocess.run([BPSLAUNCH, *command], env=clean_env(**env), capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.timeout(240)
def test_a_running_job_survives_strangers_garbage_and_lying_members(tmp_path):
    stop = tmp_path / "stop"
    begun = time.monotonic()
    with ManualJob(2, 2, "steady_sums.py", stop, BYTEPS_TIMEOUT=60) as job:
        ports = wait_for_listeners(job, ["scheduler", "server0", "server1"])
        secret = job.base["BYTEPS_JOB_SECRET"]
        layout = {k: v for k, v in job.base.items() if k.startswith("DMLC_") or k == "BYTEPS_TIMEOUT"}

        # Processes that must be turned away, each told why; the job goes on.
        print(f"job up after {time.monotonic() - begun:.1f} s")
        foreign = run_bpslaunch(dict(layout, DMLC_ROLE="server", BYTEPS_JOB_SECRET="another job's secret, long"))
        assert foreign.returncode != 0 and "job secret" in foreign.stderr, foreign.stderr
        joining = [sys.executable, "-c", "import bps_tf.numpy as b; b.init()"]
        wrong_size = run_bpslaunch(dict(layout, DMLC_ROLE="worker", DMLC_WORKER_ID=0, DMLC_NUM_WORKER=3,
                                        BYTEPS_JOB_SECRET=secret), *joining)
        assert wrong_size.returncode != 0 and "DMLC_NUM_WORKER=3" in wrong_size.stderr, wrong_size.stderr
        late = run_bpslaunch(dict(layout, DMLC_ROLE="worker", DMLC_WORKER_ID=1, BYTEPS_JOB_SECRET=secret), *joining)
        assert late.returncode != 0 and "after the job started" in late.stderr, late.stderr
        second_scheduler = run_bpslaunch(dict(layout, DMLC_ROLE="scheduler", BYTEPS_JOB_SECRET="another job's one"))
        assert second_scheduler.returncode != 0 and "cannot listen" in second_scheduler.stderr, second_scheduler.stderr
        print(f"misconfigured processes turned away after {time.monotonic() - begun:.1f} s")

        started = time.monotonic()
        cases = fuzz(list(ports.values()), secret, FUZZ_SECONDS, random.Random(2024))
        print(f"{cases} fuzz cases in {time.monotonic() - started:.1f} s")
        for name in ("scheduler", "server0", "server1", "worker0", "worker1"):
            assert job.processes[name].poll() is None, f"{name} died during the fuzz"
        stop.touch()
        for w in range(2):
            code, out = job.wait(f"worker{w}", timeout=60)
            assert code == 0, out[-3000:]
            assert f"rank {w}: " in out and "steps exact" in out, out[-3000:]
            assert "WRONG SUM" not in out
        for name in ("scheduler", "server0", "server1"):
            code, out = job.wait(name, timeout=30)
            assert code == 0, out[-3000:]
    assert cases > 100
