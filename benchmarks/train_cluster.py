"""End-to-end training throughput on an emulated cluster: Keras fit (tf-keras) of a BERT-like encoder and a
wide MLP under BytePSStrategy and MultiWorkerMirroredStrategy (RING), plus the same processes with no
communication (`local`) and with only a barrier per step (`lockstep`), to show how much of each step
communication leaves exposed. A variant is STRATEGY[+COMPRESSION][@NAME=VALUE...]: BytePSStrategy with a
compression, or any strategy with environment settings of its own (parse_variant).

python -m benchmarks.train_cluster --workers 4 --servers 4 --rate 1gbit --models bert \\
    --strategies "local,lockstep,mwms,bps,bps+onebit" --output /tmp/train.json
"""

import argparse

from benchmarks.lib import cluster_job
from benchmarks.lib.netns import EmulatedCluster
from benchmarks.lib.processes import parse_env_items
from benchmarks.lib.results import describe_machine, save_result
from benchmarks.lib.train_runs import add_training_arguments, run_training
from benchmarks.report.tables import train_table


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_training_arguments(parser)
    parser.add_argument("--strategies", default="local,mwms,bps",
                        help="local, lockstep, mwms, bps (bps_tf's defaults), bps-dense (bps with sparse gradients "
                             "densified), bps+COMPRESSION (bps with BYTEPS_COMPRESSION=COMPRESSION, e.g. bps+onebit, "
                             "bps+topk:0.01); any of them with @NAME=VALUE settings for its processes, e.g. "
                             "mwms@TF_CPU_ALLOCATOR_USE_BFC=true")
    parser.add_argument("--colocate", action="store_true", help="server i on worker i's host")
    return parser.parse_args()


def parse_variant(spelling):
    """'bps+onebit@NAME=VALUE' -> (variant 'bps+onebit', strategy 'bps', environment of its processes)."""
    variant, *settings = spelling.split("@")
    strategy = variant.split("+")[0].split("-")[0]
    env = parse_env_items(settings)
    if variant.startswith("bps+"):
        env["BYTEPS_COMPRESSION"] = variant.split("+", 1)[1]
    return variant, strategy, env


def main():
    args = parse_args()
    runs = []
    with EmulatedCluster(cluster_job.hosts_for(args.workers, args.servers, args.colocate), args.rate) as cluster:
        for model in args.models.split(","):
            batch = args.batch_bert if model == "bert" else args.batch_mlp
            for spelling in args.strategies.split(","):
                name, strategy, env = parse_variant(spelling)
                run = run_training(cluster, strategy, model, args.workers, args.servers, batch, args.steps,
                                   args.warmup, env, sparse_as_dense=name == "bps-dense", colocate=args.colocate)
                run["variant"] = name
                run["tuned"] = spelling != strategy  # a variant of the strategy's defaults
                print(f"{model} {spelling}: {run['median_step_s'] * 1e3:.0f} ms/step, "
                      f"{run['samples_per_s']:.1f} samples/s, {run.get('sent_bytes_per_step', 0) / 1e6:.1f} MB "
                      "sent per step", flush=True)
                runs.append(run)
    result = {"benchmark": "train", "rate": args.rate, "workers": args.workers, "servers": args.servers,
              "colocate": args.colocate,
              "runs": runs, "machine": describe_machine()}
    print(train_table(result))
    save_result(args.output, result)


if __name__ == "__main__":
    main()
