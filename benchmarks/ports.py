"""Free TCP ports for TensorFlow's gRPC servers on loopback."""

import socket


def free_ports(count, host="127.0.0.1"):
    """`count` distinct ports nobody listens on now (held open together so they differ)."""
    probes = [socket.socket() for _ in range(count)]
    try:
        for probe in probes:
            probe.bind((host, 0))
        return [probe.getsockname()[1] for probe in probes]
    finally:
        for probe in probes:
            probe.close()
