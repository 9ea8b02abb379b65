"""The step model's predictions where nothing can be measured here: scaling efficiency of BERT-large and
ResNet-50 from 8 to 256 GPUs (8 per machine) at 25 and 100 Gbit/s, bps_tf (as many server machines as
worker machines, RDMA, with the partition size and min spread the planner recommends for that cluster and
those servers: BYTEPS_PARTITION_BYTES, BYTEPS_MIN_SPREAD_BYTES) against a ring all-reduce (Horovod + NCCL),
with each step's compute measured on one H200 (with and without XLA), and how the 256-GPU BERT-large figure
moves when one parameter changes or the transport is TCP (the partitioning recommended again for each).

Scaling efficiency: one GPU's step without communication over the distributed step (per-GPU batch fixed);
communication runs under the backward pass (overlap 1, as in the frameworks BytePS and Horovod measured).

python -m benchmarks.scaling_predictions --output docs/performance/scaling_predictions.json
"""

import argparse
import functools

from benchmarks.lib.results import save_result
from bps_tf.plan import workloads
from bps_tf.plan.cluster import Cluster, rate_bytes_per_s
from bps_tf.plan.parameters import MEASURED
from bps_tf.plan.recommend import best_partitioning
from bps_tf.plan.step_model import ring_all_reduce_time, step_time

GPUS = (8, 16, 32, 64, 128, 256)
LINKS = ("25gbit", "100gbit")


@functools.lru_cache(maxsize=None)
def _communication(model, machines, link, transport, params, element_bytes):
    """bps_tf's recommended (partition, min spread, seconds, bound) and the ring's (seconds, bound); the same
    with and without XLA."""
    tensors = workloads.gradient_bytes(model, element_bytes)
    cluster = Cluster(machines=machines, gpus_per_machine=8, link_bytes_per_s=rate_bytes_per_s(link),
                      servers=machines, transport=transport)
    return best_partitioning(cluster, tensors, params, element_bytes), ring_all_reduce_time(cluster, sum(tensors),
                                                                                            params)


def efficiencies(model, gpus, link, xla=True, params=MEASURED, element_bytes=2, compute_scale=1.0, transport="rdma"):
    compute = workloads.compute_seconds(model, xla) * compute_scale
    (partition, spread, bps, bps_bound), (ring, ring_bound) = _communication(model, gpus // 8, link, transport,
                                                                             params, element_bytes)
    return {"model": model, "gpus": gpus, "link": link, "xla": xla, "transport": transport, "compute_s": compute,
            "partition_bytes": partition, "min_spread_bytes": spread,
            "bps_communication_s": bps, "bps_bound": bps_bound, "ring_communication_s": ring,
            "ring_bound": ring_bound,
            "bps_efficiency": compute / step_time(compute, bps, params), "ring_efficiency":
                compute / step_time(compute, ring, params)}


SENSITIVITY = {  # label: keyword arguments of efficiencies()
    "as predicted (H200 with XLA, bf16 gradients)": {},
    "compute 5x slower (a V100-class GPU)": {"compute_scale": 5.0},
    "float32 gradients": {"element_bytes": 4},
    "server messages 10x cheaper (RDMA instead of TCP's per-message CPU)": {
        "params": MEASURED.replace(message_s=MEASURED.message_s / 10)},
    "over TCP (256 KB slices, sockets on 4 I/O threads)": {"transport": "tcp"},
    "over TCP, 1 I/O thread per process": {"transport": "tcp", "params": MEASURED.replace(io_threads=1)},
    "ring steps without latency": {"params": MEASURED.replace(ring_step_s=0.0)},
    "4 summing threads per server": {"params": MEASURED.replace(sum_threads=4)},
    "no overlap with the backward pass": {"params": MEASURED.replace(backward_share=0.0)},
}


def _partitioning(row):
    return f"partitions {row['partition_bytes']}, min spread {row['min_spread_bytes']}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output")
    args = parser.parse_args()
    rows = [efficiencies(m, g, link, xla) for m in workloads.WORKLOADS for link in LINKS for xla in (True, False)
            for g in GPUS]
    for r in rows:
        print(f"{r['model']} {r['link']} {'XLA' if r['xla'] else 'eager'} {r['gpus']} GPUs: bps_tf "
              f"{r['bps_efficiency']:.0%} ({r['bps_communication_s'] * 1e3:.0f} ms, {r['bps_bound']}; "
              f"{_partitioning(r)}), ring {r['ring_efficiency']:.0%} ({r['ring_communication_s'] * 1e3:.0f} ms, "
              f"{r['ring_bound']})")
    sensitivity = [dict(efficiencies("bert-large", 256, "100gbit", **kw), change=label)
                   for label, kw in SENSITIVITY.items()]
    for r in sensitivity:
        print(f"256 GPUs, BERT-large, 100 Gbit/s, {r['change']}: bps_tf {r['bps_efficiency']:.0%} "
              f"({r['bps_communication_s'] * 1e3:.0f} ms, {r['bps_bound']}; {_partitioning(r)}), ring "
              f"{r['ring_efficiency']:.0%}")
    save_result(args.output, {"benchmark": "scaling_predictions", "rows": rows, "sensitivity": sensitivity,
                              "parameters": MEASURED.__dict__})


if __name__ == "__main__":
    main()
