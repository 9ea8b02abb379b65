"""End-to-end training throughput on an emulated cluster: Keras fit (tf-keras) of a BERT-like encoder and a
wide MLP under BytePSStrategy and MultiWorkerMirroredStrategy (RING), plus the same processes with no
communication, to show how much of each step communication leaves exposed.

python -m benchmarks.train_cluster --workers 4 --servers 4 --rate 1gbit \\
    --output docs/performance/train_w4_s4_1gbit.json
"""

import argparse

from benchmarks import cluster_job, machine
from benchmarks.job_env import parse_env_items
from benchmarks.netns import EmulatedCluster
from benchmarks.report_table import train_table
from benchmarks.train_runs import add_training_arguments, run_training
from benchmarks.results import save_result


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_training_arguments(parser)
    parser.add_argument("--strategies", default="local,mwms,bps",
                        help="local, mwms, bps (bps_tf's defaults), bps-tuned (bps with the --env settings), "
                             "bps-dense (bps with sparse gradients densified), bps+COMPRESSION (bps with "
                             "BYTEPS_COMPRESSION=COMPRESSION, e.g. bps+onebit, bps+topk:0.01)")
    parser.add_argument("--colocate", action="store_true", help="server i on worker i's host")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="for the bps-tuned runs")
    return parser.parse_args()


def main():
    args = parse_args()
    bps_env = parse_env_items(args.env)
    runs = []
    with EmulatedCluster(cluster_job.hosts_for(args.workers, args.servers, args.colocate), args.rate) as cluster:
        for model in args.models.split(","):
            batch = args.batch_bert if model == "bert" else args.batch_mlp
            for name in args.strategies.split(","):
                strategy = "bps" if name.startswith("bps") else name
                env = bps_env if name == "bps-tuned" else {}
                if name.startswith("bps+"):
                    env = {"BYTEPS_COMPRESSION": name.split("+", 1)[1]}
                run = run_training(cluster, strategy, model, args.workers, args.servers, batch, args.steps,
                                   args.warmup, env, sparse_as_dense=name == "bps-dense", colocate=args.colocate)
                run["variant"] = name
                run["tuned"] = name != strategy  # a variant of bps_tf's defaults
                print(f"{model} {name}: {run['median_step_s'] * 1e3:.0f} ms/step, "
                      f"{run['samples_per_s']:.1f} samples/s, {run.get('sent_bytes_per_step', 0) / 1e6:.1f} MB "
                      "sent per step", flush=True)
                runs.append(run)
    result = {"benchmark": "train", "rate": args.rate, "workers": args.workers, "servers": args.servers,
              "colocate": args.colocate,
              "runs": runs, "machine": machine.describe()}
    print(train_table(result))
    save_result(args.output, result)


if __name__ == "__main__":
    main()
