"""bps_tf's wire protocol spoken from Python, for the tests that play a stranger or a lying member of a job:
the handshake (cc/transport/handshake.h), frames (cc/transport/tcp_frames.h) and messages (cc/ps/message.h).
An independent implementation, so the tests also check that the core speaks what its headers describe."""

import hashlib
import hmac
import os
import socket
import struct
from pathlib import Path

HANDSHAKE_MAGIC = b"bps_tf\x01\n"
MESSAGE_MAGIC = 0x42505331
NO_OFFSET = 2**64 - 1
TYPES = dict(REGISTER=1, ADDRESS_BOOK=2, DECLARE=3, DECLARE_REPLY=4, PUSH=5, PULL_REPLY=6, FINISH=7, SHUTDOWN=8,
             ABORT=9, SERVER_READY=10, IDENTIFY=11, IDENTIFY_REPLY=12, KEY_PLAN=13, KEY_PLAN_REPLY=14,
             WORKER_FINISHED=15, RESET=16, RESET_REPLY=17, GENERATION_DONE=18, ABORT_REQUEST=19, FETCH=20,
             SAVE_RESIDUAL=21, LOAD_RESIDUAL=22, JOIN_PENDING=23, WORKERS_WAITING=24, GENERATION_BROKEN=25,
             NEXT_GENERATION=26)
FLOAT32 = 2


def connect(port, host="127.0.0.1", timeout=5):
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.settimeout(timeout)
    return sock


def receive_exactly(sock, count):
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def handshake(sock, secret):
    """Proves `secret` on a fresh connection; True when the peer accepted it and proved it holds it too."""
    hello = receive_exactly(sock, 40)
    assert hello[:8] == HANDSHAKE_MAGIC, hello
    server_nonce, client_nonce = hello[8:], os.urandom(32)
    key = secret.encode() if isinstance(secret, str) else secret
    proof = hmac.new(key, b"bps_tf client" + server_nonce + client_nonce, hashlib.sha256).digest()
    sock.sendall(HANDSHAKE_MAGIC + client_nonce + proof)
    verdict = receive_exactly(sock, 1)
    if verdict != b"\x00":
        return False
    server_proof = receive_exactly(sock, 32)
    expected = hmac.new(key, b"bps_tf server" + server_nonce + client_nonce, hashlib.sha256).digest()
    return hmac.compare_digest(server_proof, expected)


def frame(header, payload=b""):
    return struct.pack("<IQ", len(header), len(payload)) + header + payload


def message(kind, sender=-1, request_id=0, key=0, round_=0, dtype=FLOAT32, num_elements=0, participants=0,
            zeros=0, echo=0, share=0, in_shared=0, shared_result=NO_OFFSET, shared_receive=NO_OFFSET, held_us=0,
            code=0, text=b""):
    kind = TYPES[kind] if isinstance(kind, str) else kind
    return struct.pack("<IBiQQIBQiBBBBQQQBI", MESSAGE_MAGIC, kind, sender, request_id, key, round_, dtype,
                       num_elements, participants, zeros, echo, share, in_shared, shared_result, shared_receive,
                       held_us, code, len(text)) + text


def register_body(role, worker_id, local_rank, local_size, num_worker, num_server, address, min_workers=0,
                  max_workers=0):
    """role: 0 scheduler, 1 server, 2 worker. min_workers, max_workers: an elastic job's limits (0: not elastic)."""
    address = address.encode()
    return struct.pack("<iiiiiiiiI", role, worker_id, local_rank, local_size, num_worker, num_server, min_workers,
                       max_workers, len(address)) + address


def tensor_spec(name, dtype, shape, scope=0):
    name = name.encode()
    return (struct.pack("<I", len(name)) + name + struct.pack("<BI", dtype, len(shape)) +
            b"".join(struct.pack("<q", d) for d in shape) + struct.pack("<B", scope))


def listening_ports(pid):
    """TCP ports process `pid` listens on (from /proc: its socket inodes in the kernel's table)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = []
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
            ports.append(int(fields[1].split(":")[1], 16))
    return ports
