"""Raw TCP goodput of the emulated cluster under push_pull's traffic: every worker host sends BYTES to every
server host and receives BYTES back from it, all at once (the push and the pull of a tensor of
servers x BYTES). No bps_tf: what plain TCP gets through these links and the machine's cores under that
load, the capacity a push_pull can at best reach, measured in the same run.

python -m benchmarks.workers.duplex_check serve PORT CONNECTIONS BYTES   (on each server host)
python -m benchmarks.workers.duplex_check send PORT BYTES HOST...        (on each worker host; prints the
                                                                          bytes/s it sent, per direction)
"""

import socket
import sys
import threading
import time

CHUNK = 1 << 20


def _pump(connection, nbytes, first_byte=None):
    """Sends and receives `nbytes` on one connection at the same time (a thread each way); appends the time
    of the first byte received to `first_byte`."""

    def send():
        payload = bytes(CHUNK)
        sent = 0
        while sent < nbytes:
            step = min(CHUNK, nbytes - sent)
            connection.sendall(payload[:step])
            sent += step

    sender = threading.Thread(target=send)
    sender.start()
    buffer = bytearray(CHUNK)
    received = 0
    while received < nbytes:
        got = connection.recv_into(buffer)
        if not got:
            raise ConnectionError(f"peer closed after {received} of {nbytes} bytes")
        if not received and first_byte is not None:
            first_byte.append(time.perf_counter())
        received += got
    sender.join()


def serve(port, connections, nbytes):
    with socket.create_server(("0.0.0.0", port), backlog=connections) as server:
        accepted = [server.accept()[0] for _ in range(connections)]
        pumps = [threading.Thread(target=_pump, args=(c, nbytes)) for c in accepted]
        for p in pumps:
            p.start()
        for p in pumps:
            p.join()
        for c in accepted:
            c.recv(1)  # the worker's end mark: close only after it has every byte
            c.close()


def _connect(host, port):
    for _ in range(200):  # the servers may not be listening yet
        try:
            return socket.create_connection((host, port), timeout=120)
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"cannot reach {host}:{port}")


def send(port, nbytes, hosts):
    connections = [_connect(h, port) for h in hosts]
    first_byte = []  # the servers start once every worker is connected: time from then
    pumps = [threading.Thread(target=_pump, args=(c, nbytes, first_byte)) for c in connections]
    for p in pumps:
        p.start()
    for p in pumps:
        p.join()
    seconds = time.perf_counter() - min(first_byte)
    for c in connections:
        c.sendall(b"k")
        c.close()
    print(f"{len(hosts) * nbytes / seconds:.0f}")


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    else:
        send(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
