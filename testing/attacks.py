"""Traffic from strangers and lying members of a running job, for the attack tests and the reliability cases:
raw bytes, wrong secrets, and random, mutated or replayed messages (testing.wire) at the job's ports."""

import errno
import selectors
import socket
import struct
import threading
import time

from testing import wire


def wait_for_listeners(job, names, timeout=30):
    """{name: the port it listens on} for the processes `names` of `job`, once every one of them listens."""
    return wait_for_ports({name: job.processes[name].pid for name in names}, timeout)


def wait_for_ports(pids, timeout=30):
    """{name: the port it listens on} for the processes {name: pid}, once every one of them listens."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ports = {name: wire.listening_ports(pid) for name, pid in pids.items()}
        if all(ports.values()):
            return {name: found[0] for name, found in ports.items()}
        time.sleep(0.1)
    raise AssertionError(f"{list(pids)} did not listen within {timeout} s")


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


class Strangers:
    """`count` connections to `ports` (spread evenly) that never prove the job's secret, kept open from a thread.
    Each sends one of `sends` once connected, in turn: by default a third stay silent, a third send one byte
    (the protocol's first) and a third send garbage. Each one that its peer closes is opened again at once, so
    that strangers hold every place for unproven connections for as long as they run; a port nobody listens on
    yet is tried again every 20 ms. Use as a context manager."""

    IDLE, ONE_BYTE, GARBAGE = b"", b"b", b"\xde\xad\xbe\xef" * 4
    RETRY_REFUSED_S = 0.02

    def __init__(self, ports, count, sends=(IDLE, ONE_BYTE, GARBAGE)):
        self.ports, self.count, self.sends = list(ports), count, tuple(sends)
        self.opened = 0  # connections made
        self.closed = 0  # of those, closed by their peer
        self.refused = 0  # attempts nobody listened to
        self.failure = None
        self._selector = selectors.DefaultSelector()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run_or_record, name="strangers", daemon=True)
        self._open_now = 0
        self._ever_open = bytearray(count)  # 1 for each connection that was open at least once
        self._ever_open_count = 0

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stopping.set()
        self._thread.join()
        for key in list(self._selector.get_map().values()):
            key.fileobj.close()
        self._selector.close()
        self.check()

    def check(self):
        if self.failure is not None:
            raise AssertionError(f"the strangers' thread failed: {self.failure!r}")

    def holding(self):
        """How many of the connections are open now (made and not yet closed by the peer)."""
        self.check()
        return self._open_now

    def wait_until_each_was_open(self, timeout=30):
        """Waits until each of the connections was made at least once."""
        deadline = time.monotonic() + timeout
        while self._ever_open_count < self.count:
            self.check()
            if time.monotonic() > deadline:
                raise AssertionError(f"only {self._ever_open_count} of {self.count} strangers' connections were "
                                     f"ever made within {timeout} s")
            time.sleep(0.01)

    def _open(self, slot, retry):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        error = sock.connect_ex(("127.0.0.1", self.ports[slot % len(self.ports)]))
        if error not in (0, errno.EINPROGRESS, errno.EAGAIN):  # refused at once, on loopback
            sock.close()
            self.refused += 1
            retry.append((time.monotonic() + self.RETRY_REFUSED_S, slot))
            return
        self._selector.register(sock, selectors.EVENT_WRITE, [slot, False])

    def _drop(self, sock, data):
        self._selector.unregister(sock)
        sock.close()
        if data[1]:
            self._open_now -= 1

    def _run_or_record(self):
        try:
            self._run()
        except Exception as error:  # seen by the test through check()
            self.failure = error

    def _run(self):
        retry = []  # (when, slot)
        for slot in range(self.count):
            self._open(slot, retry)
        while not self._stopping.is_set():
            for key, _ in self._selector.select(timeout=0.01):
                sock, data = key.fileobj, key.data
                slot, connected = data
                if not connected:
                    error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if error in (0, errno.EISCONN):
                        data[1] = True
                        self.opened += 1
                        self._open_now += 1
                        if not self._ever_open[slot]:
                            self._ever_open[slot] = 1
                            self._ever_open_count += 1
                        self._selector.modify(sock, selectors.EVENT_READ, data)
                        try:
                            sock.send(self.sends[slot % len(self.sends)])
                        except OSError:
                            pass  # closed already: the read below sees it
                    else:
                        self.refused += 1
                        self._drop(sock, data)
                        retry.append((time.monotonic() + self.RETRY_REFUSED_S, slot))
                    continue
                try:
                    alive = bool(sock.recv(4096))  # the hello, otherwise the end
                except BlockingIOError:
                    alive = True
                except OSError:
                    alive = False
                if not alive:
                    self.closed += 1
                    self._drop(sock, data)
                    self._open(slot, retry)
            now = time.monotonic()
            due = [slot for when, slot in retry if when <= now]
            retry = [(when, slot) for when, slot in retry if when > now]
            for slot in due:
                self._open(slot, retry)


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
    """How long a member of the job takes to connect and prove `secret` at `port`, trying again 20 ms after being
    turned away, as the transport's members do."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        try:
            with wire.connect(port, timeout=2) as sock:
                if wire.handshake(sock, secret):
                    return time.monotonic() - started
        except (ConnectionError, OSError):
            time.sleep(0.02)
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
