"""python -m bps_tf.plan: expected communication time per step with S servers against a ring all-reduce, and
the servers, partition size and min spread to use, from the step model (bps_tf/plan/step_model.py)."""

import argparse
import json

from bps_tf.plan import workloads
from bps_tf.plan.cluster import Cluster, rate_bytes_per_s
from bps_tf.plan.parameters import MEASURED
from bps_tf.plan.recommend import recommend, servers_table
from bps_tf.plan.step_model import ring_all_reduce_time, step_time

EXAMPLES = """examples:
  python -m bps_tf.plan --machines 32 --gpus-per-machine 8 --link 100gbit --model bert-large
  python -m bps_tf.plan --machines 4 --link 25gbit --transport tcp --gradient-bytes 100e6 --compute-ms 120
  python -m bps_tf.plan --machines 8 --gpus-per-machine 8 --link 100gbit --keras-model model.keras
"""


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m bps_tf.plan", description=__doc__, epilog=EXAMPLES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--machines", type=int, required=True, help="worker machines")
    parser.add_argument("--gpus-per-machine", type=int, default=1)
    parser.add_argument("--link", required=True, help="each machine's link, each direction: 100gbit, 25gbit, 1gbit")
    parser.add_argument("--server-link", help="each server machine's link (default: --link)")
    parser.add_argument("--transport", choices=("rdma", "tcp"), default="rdma",
                        help="rdma: whole partitions; tcp: partitions in slices (BYTEPS_SLICE_BYTES)")
    parser.add_argument("--servers", type=int, help="evaluate this many servers only (default: 1 to 2 x machines)")
    parser.add_argument("--colocate", action="store_true", help="one server on each worker machine")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--gradient-bytes", type=float, help="bytes of one step's gradients (one tensor per 4 MB)")
    what.add_argument("--model", choices=sorted(workloads.WORKLOADS), help="a known model's gradients")
    what.add_argument("--keras-model", help="a saved Keras model (.keras, .h5, SavedModel): its trainable variables")
    parser.add_argument("--gradient-element-bytes", type=int,
                        help="bytes per gradient element (default 4; --model: 2, as under mixed precision)")
    parser.add_argument("--compute-ms", type=float, help="compute of one step on one GPU (--model: H200, XLA)")
    parser.add_argument("--overlap", type=float, default=1.0,
                        help="share of the backward pass communication can run under (0: none)")
    parser.add_argument("--partition-bytes", type=int, default=MEASURED.partition_bytes,
                        help="BYTEPS_PARTITION_BYTES of the table's rows")
    parser.add_argument("--min-spread-bytes", type=int, default=MEASURED.min_spread_bytes,
                        help="BYTEPS_MIN_SPREAD_BYTES of the table's rows: the smallest piece of a tensor spread over "
                             "the servers")
    parser.add_argument("--io-threads", type=int, default=MEASURED.io_threads,
                        help="BYTEPS_TCP_IO_THREADS of every process (--transport tcp; default: a machine of 8 cores "
                             "or more)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    return parser.parse_args(argv)


def gradients(args):
    if args.model:
        return workloads.gradient_bytes(args.model, args.gradient_element_bytes or 2)
    if args.keras_model:
        from bps_tf.plan import keras_model

        return keras_model.gradient_bytes(args.keras_model, args.gradient_element_bytes)
    total, piece = int(args.gradient_bytes), 4 << 20
    return [piece] * (total // piece) + ([total % piece] if total % piece else [])


def plan_from(args):
    if args.colocate and args.servers not in (None, args.machines):
        raise SystemExit("--colocate puts one server on each worker machine: --servers must equal --machines")
    servers = args.machines if args.colocate else (args.servers or 1)
    cluster = Cluster(machines=args.machines, gpus_per_machine=args.gpus_per_machine,
                      link_bytes_per_s=rate_bytes_per_s(args.link), servers=servers,
                      server_link_bytes_per_s=rate_bytes_per_s(args.server_link) if args.server_link else None,
                      colocated=args.colocate, transport=args.transport)
    if args.io_threads < 1:
        raise SystemExit("--io-threads: at least 1 (BYTEPS_TCP_IO_THREADS)")
    if args.partition_bytes < 8 or args.min_spread_bytes < 8:  # as BYTEPS_PARTITION_BYTES and BYTEPS_MIN_SPREAD_BYTES
        raise SystemExit("--partition-bytes and --min-spread-bytes: at least 8 bytes")
    params = MEASURED.replace(partition_bytes=args.partition_bytes, min_spread_bytes=args.min_spread_bytes,
                              io_threads=args.io_threads)
    tensors = gradients(args)
    element = args.gradient_element_bytes or (2 if args.model else 4)
    if args.servers or args.colocate:
        table = servers_table(cluster, tensors, params, most=servers, element_bytes=element)
        table = [row for row in table if row[0] == servers]
    else:
        table = servers_table(cluster, tensors, params, element_bytes=element)
    ring, ring_bound = ring_all_reduce_time(cluster, sum(tensors), params)
    result = {"machines": args.machines, "gpus_per_machine": args.gpus_per_machine, "link": args.link,
              "transport": args.transport, "gradient_bytes": sum(tensors), "tensors": len(tensors),
              "ring_all_reduce_s": ring, "ring_bound": ring_bound,
              "servers": [{"servers": s, "seconds": t, "bound": b} for s, t, b in table]}
    if not (args.servers or args.colocate):
        best_servers, partition, spread, seconds = recommend(cluster, tensors, params, element_bytes=element)
        result["recommended"] = {"servers": best_servers, "partition_bytes": partition, "min_spread_bytes": spread,
                                 "seconds": seconds}
    compute = args.compute_ms / 1e3 if args.compute_ms else (
        workloads.compute_seconds(args.model) if args.model else None)
    if compute:
        chosen = result.get("recommended", {}).get("seconds", table[0][1])
        bps = step_time(compute, chosen, params, args.overlap)
        ring_step = step_time(compute, ring, params, args.overlap)
        result.update(compute_s=compute, overlap=args.overlap, step_s=bps, ring_step_s=ring_step,
                      scaling_efficiency=compute / bps, ring_scaling_efficiency=compute / ring_step)
    return result


def report(r):
    lines = [f"{r['machines']} machines x {r['gpus_per_machine']} GPUs, {r['link']} links ({r['transport']}), "
             f"{r['gradient_bytes'] / 1e6:.1f} MB of gradients in {r['tensors']} tensors per step",
             "", "| servers | bps_tf communication per step | bound by | ring all-reduce time / this |", "|---|---|---|---|"]
    for row in r["servers"]:
        lines.append(f"| {row['servers']} | {row['seconds'] * 1e3:.1f} ms | {row['bound']} | "
                     f"{r['ring_all_reduce_s'] / row['seconds']:.2f} |")
    lines += ["", f"ring all-reduce: {r['ring_all_reduce_s'] * 1e3:.1f} ms per step (bound by {r['ring_bound']})"]
    if "recommended" in r:
        rec = r["recommended"]
        lines.append(f"recommended: {rec['servers']} servers, BYTEPS_PARTITION_BYTES={rec['partition_bytes']} "
                     f"BYTEPS_MIN_SPREAD_BYTES={rec['min_spread_bytes']} ({rec['seconds'] * 1e3:.1f} ms per step; "
                     f"each server on a machine with its own link)")
    if "step_s" in r:
        lines.append(f"step with {r['compute_s'] * 1e3:.1f} ms of compute (overlap {r['overlap']:g}): bps_tf "
                     f"{r['step_s'] * 1e3:.1f} ms, scaling efficiency {r['scaling_efficiency']:.0%}; ring "
                     f"{r['ring_step_s'] * 1e3:.1f} ms, {r['ring_scaling_efficiency']:.0%}")
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    result = plan_from(args)
    print(json.dumps(result, indent=1) if args.json else report(result))
    return 0
