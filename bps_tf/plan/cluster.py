"""The cluster a step runs on: worker machines and their GPUs, the servers, the links, the transport."""

import dataclasses
import re

_BITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
_BYTES = {"bps": 1, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9}


def rate_bytes_per_s(rate):
    """A link rate in tc's units (1gbit, 100mbit, 25gbit; 100mbps is bytes) as bytes per second."""
    match = re.fullmatch(r"([0-9.]+)\s*([a-z]+)", str(rate).strip().lower())
    if not match or match.group(2) not in {**_BITS, **_BYTES}:
        raise ValueError(f"rate {rate!r}: use tc's units, e.g. 100gbit, 25gbit, 1gbit, 100mbit")
    value, unit = float(match.group(1)), match.group(2)
    return value * _BITS[unit] / 8 if unit in _BITS else value * _BYTES[unit]


@dataclasses.dataclass(frozen=True)
class Cluster:
    """machines: worker machines; servers: server processes, each on a machine of its own with a link of
    server_link_bytes_per_s (default: the workers' link), or one on each worker machine (colocated).
    transport: "tcp" (partitions cross in slices) or "rdma" (whole partitions).

    shared_cores, machine_bytes_per_s, call_s and burst_bytes describe an emulated cluster, where every host
    shares one machine's cores: what the cores can move in all (bytes through sockets per second), the
    measured time of one small push_pull (call_s), and the bytes a link direction lets through at once
    after it idled (the token bucket of tc's rate limiter). None (0 for the burst) on real clusters."""

    machines: int
    link_bytes_per_s: float
    servers: int = 1
    gpus_per_machine: int = 1
    server_link_bytes_per_s: float = None
    colocated: bool = False
    transport: str = "rdma"
    shared_cores: int = None
    machine_bytes_per_s: float = None
    call_s: float = None
    burst_bytes: float = 0

    def __post_init__(self):
        if self.machines < 1 or self.servers < 1 or self.gpus_per_machine < 1:
            raise ValueError("machines, servers and GPUs per machine are at least 1")
        if self.colocated and self.servers != self.machines:
            raise ValueError("colocated servers: one on each worker machine (servers = machines)")
        if self.transport not in ("tcp", "rdma"):
            raise ValueError("transport is tcp or rdma")

    @property
    def server_link(self):
        return self.server_link_bytes_per_s or self.link_bytes_per_s

    def with_servers(self, servers):
        return dataclasses.replace(self, servers=servers)
