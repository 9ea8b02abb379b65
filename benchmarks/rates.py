"""tc rate strings (1gbit, 500mbit, 100mbps) as bytes per second, for the bounds M/B and 2(N-1)/N*M/B."""

import re

_BITS = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}
_BYTES = {"bps": 1, "kbps": 1e3, "mbps": 1e6, "gbps": 1e9}


def rate_bytes_per_s(rate):
    match = re.fullmatch(r"([0-9.]+)([a-z]+)", rate.strip().lower())
    if not match or match.group(2) not in {**_BITS, **_BYTES}:
        raise ValueError(f"rate {rate!r}: use tc's units, e.g. 1gbit, 500mbit, 100mbps")
    value, unit = float(match.group(1)), match.group(2)
    return value * _BITS[unit] / 8 if unit in _BITS else value * _BYTES[unit]


def bounds(rate, workers, servers, colocate):
    """Lower bounds on one push_pull or all-reduce of M bytes, as factors of M/B.

    push_pull with servers on their own hosts: each worker's link carries M out and M in -> M/B.
    Servers co-located with workers (one per worker host): a host's link also carries its server's
    traffic, (N-1)/N*M out for the other workers' results plus (N-1)/N*M of its worker's push -> 2(N-1)/N."""
    if colocate and servers != workers:
        raise ValueError("colocate places one server on each worker host: use as many servers as workers")
    ring = 2 * (workers - 1) / workers
    return {"rate": rate, "link_bytes_s": rate_bytes_per_s(rate), "ring_factor": ring,
            "push_pull_factor": ring if colocate else 1.0}
