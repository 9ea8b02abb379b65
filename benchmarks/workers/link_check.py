"""Raw TCP goodput of one emulated link, measured in the same run as the benchmarks: the best any transport
over TCP can do there (tbf counts Ethernet frames, so TCP/IP headers take a few percent of the rate).

python -m benchmarks.workers.link_check serve PORT BYTES    (prints the receive rate in bytes/s)
python -m benchmarks.workers.link_check send HOST PORT BYTES
"""

import socket
import sys
import time

CHUNK = 1 << 20


def serve(port, nbytes):
    with socket.create_server(("0.0.0.0", port)) as server:
        connection, _ = server.accept()
        with connection:
            received, started = 0, None
            buffer = bytearray(CHUNK)
            while received < nbytes:
                got = connection.recv_into(buffer)
                if not got:
                    break
                started = started or time.perf_counter()
                received += got
            seconds = time.perf_counter() - started
            connection.sendall(b"k")  # the sender exits only after the last byte arrived
    print(f"{received / seconds:.0f}")


def send(host, port, nbytes):
    payload = bytes(CHUNK)
    for _ in range(100):  # the receiver may not be listening yet
        try:
            connection = socket.create_connection((host, port), timeout=30)
            break
        except OSError:
            time.sleep(0.1)
    else:
        raise SystemExit(f"cannot reach {host}:{port}")
    with connection:
        sent = 0
        while sent < nbytes:
            connection.sendall(payload[: min(CHUNK, nbytes - sent)])
            sent += min(CHUNK, nbytes - sent)
        connection.recv(1)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(int(sys.argv[2]), int(sys.argv[3]))
    else:
        send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
