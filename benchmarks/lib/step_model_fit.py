"""Between the step model (bps_tf.plan) and the emulated cluster: the parameters a run measures (the emulated
machine's capacity and its cost per message, from push_pulls on unlimited links), the one it fits (the links' efficiency
with push and pull at once, on the 2-worker push_pulls), and the model's prediction of each case."""

import math

from bps_tf.plan.cluster import Cluster
from bps_tf.plan.parameters import MEASURED
from bps_tf.plan.step_model import cores_time, network_stages, pipeline_lag, plan_for, push_pull_time

CORES = 2  # every emulated host shares this machine's cores
BURST_BYTES = 256 << 10  # tc's tbf burst on every emulated link direction (benchmarks/lib/netns.py: "256kb")
# What a switch port buffers when the model is checked: the model has no term for lost packets. Bytes, not
# time: what arrives at once at a server's port is every machine's credit window, the same bytes at any link
# speed, and a data-centre switch holds megabytes per congested port. (netns's default of 50 ms is 625 KB at
# 100 Mbit/s: eight workers' pushes into one server's port overflowed it, and TCP's retransmission timeouts,
# not the link, set the pace.)
SWITCH_BUFFER_BYTES = 16 << 20


def bert_like_tensors(vocab=8192, seq=128, hidden=256, ffn=1024, layers=4, classes=2):
    """Gradient bytes per tensor of benchmarks/lib/models.py's BERT-like model (testing.models.encoder) (float32)."""
    h = hidden
    elements = [vocab * h, seq * h]
    for _ in range(layers):
        elements += [h * h, h] * 4 + [h, h, h * ffn, ffn, ffn * h, h, h, h]
    return [4 * e for e in elements + [h * classes, classes]]


def cluster_for(workers, servers, link_bytes_s, emulation):
    """The emulated cluster as the model sees it; emulation: {"machine_bytes_per_s", "call_s"}."""
    return Cluster(machines=workers, servers=servers, link_bytes_per_s=link_bytes_s, transport="tcp",
                   shared_cores=CORES, machine_bytes_per_s=emulation["machine_bytes_per_s"],
                   call_s=emulation["call_s"], burst_bytes=BURST_BYTES)


def messages(workers, servers, tensor_bytes):
    """Message ends of one push_pull of these tensors over the emulated cluster: each slice's push and reply,
    each handled at both its ends, from every worker."""
    units = plan_for(Cluster(workers, 1.0, servers, transport="tcp"), tensor_bytes, MEASURED).units
    return 2 * 2 * workers * units


def link_goodput_fraction(link_bytes_s, check_bytes, checks):
    """The links' TCP goodput over their tc rate from the run's link checks (raw TCP, check_bytes each): every
    emulated link has the same limits and a check on the loaded machine can only read low, so the best,
    less the bucket's burst that the check's first bytes got through at once."""
    best = max(checks)
    return best / (link_bytes_s + BURST_BYTES * best / check_bytes)


def emulation_parameters(workers, servers, unlimited):
    """From one run on unlimited links (unlimited: case -> median seconds, with "tiny64" 64 tensors of 4 KB,
    "single4096" and "single67108864"): the cost of a message end (the cores' time per message end, so
    seconds of CPU with CORES cores) and what the cores move per second besides."""
    call = unlimited["single4096"]
    tiny = [4096] * 64
    message_s = (unlimited["tiny64"] - call) * CORES / messages(workers, servers, tiny)
    big = [64 << 20]
    message_part = messages(workers, servers, big) * message_s / CORES
    bytes_s = 2 * workers * big[0] / max(1e-6, unlimited["single67108864"] - call - message_part)
    return {"message_s": message_s, "machine_bytes_per_s": bytes_s}


def predict(workers, servers, link_bytes_s, goodput_fraction, emulation, tensor_bytes, fitted):
    params = MEASURED.replace(goodput_fraction=goodput_fraction, message_s=emulation["message_s"], **fitted)
    return push_pull_time(cluster_for(workers, servers, link_bytes_s, emulation), tensor_bytes, params)[0]


def fit_duplex(cases):
    """Least squares, relative to each measured time, of duplex_fraction over cases of [measured s, link bytes/s,
    goodput fraction, workers, servers, emulation, tensor_bytes]. Past the call and the cores' share (undone from
    the model's sqrt(a^2 + b^2)), the time is the busiest link's L plus the pulls' lag F, both at duplex 1:
    (L + F) / duplex. A link carries no more each way than one stream's goodput: at most 1."""
    rows, targets = [], []
    for measured, link, goodput, workers, servers, emulation, tensors in cases:
        cluster = cluster_for(workers, servers, link, emulation)
        params = MEASURED.replace(goodput_fraction=goodput, message_s=emulation["message_s"], duplex_fraction=1.0)
        plan = plan_for(cluster, tensors, params)
        stages = network_stages(cluster, plan, params)
        busiest = max(v for k, v in stages.items() if "link" in k)
        cores = cores_time(cluster, plan, params)
        net = math.sqrt(max(0.0, (measured - emulation["call_s"]) ** 2 - cores ** 2))
        rows.append((busiest + pipeline_lag(cluster, plan, params)) / measured)
        targets.append(net / measured)
    inverse_duplex = sum(r * t for r, t in zip(rows, targets)) / sum(r * r for r in rows)
    return {"duplex_fraction": min(1.0, 1 / inverse_duplex)}
