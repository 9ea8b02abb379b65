"""Traffic from strangers and lying members of a running job, for the attack tests and the reliability cases:
raw bytes, wrong secrets, and random, mutated or replayed messages (testing.wire) at the job's ports."""

import socket
import struct
import time

from testing import wire


def wait_for_listeners(job, names, timeout=30):
    """{name: the port it listens on} for the processes `names` of `job`, once every one of them listens."""
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


def hold_strangers(ports, count):
    """`count` connections spread over `ports` that never prove anything: half stay silent, half send one byte."""
    sockets = []
    for i in range(count):
        sock = socket.create_connection(("127.0.0.1", ports[i % len(ports)]), timeout=5)
        if i % 2:
            sock.send(b"b")
        sockets.append(sock)
    return sockets


def still_open(sockets):
    """How many of `sockets` their peer has not closed."""
    count = 0
    for sock in sockets:
        sock.setblocking(False)
        try:
            while sock.recv(4096):  # the hello, if it is still unread
                pass
        except BlockingIOError:
            count += 1
        except OSError:
            pass  # reset by the peer: closed
    return count


def member_handshake_seconds(port, secret, timeout=10):
    """How long a member of the job takes to connect and prove `secret` at `port`, retrying when turned away."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            with wire.connect(port, timeout=2) as sock:
                if wire.handshake(sock, secret):
                    return time.monotonic() - started
        except (ConnectionError, OSError):
            time.sleep(0.2)
    raise AssertionError(f"a member could not connect to port {port} within {timeout} s")


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
