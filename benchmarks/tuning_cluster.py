"""Effect of bps_tf's scheduling (priority order and credit window) and of the partition size on the step
time of BytePSStrategy training, on an emulated cluster. Every variant runs in the same emulated cluster,
one after the other; the first (the defaults) is repeated at the end to show the drift between runs.

python -m benchmarks.tuning_cluster --workers 4 --servers 4 --rate 1gbit \\
    --output docs/performance/tuning_w4_s4_1gbit.json
"""

import argparse

from benchmarks.lib import cluster_job
from benchmarks.lib.netns import EmulatedCluster
from benchmarks.lib.results import describe_machine, save_result
from benchmarks.lib.train_runs import add_training_arguments, run_training
from benchmarks.report.tables import tuning_table

MB = 1024000  # BytePS counts partition sizes in these units (default 4096000)

# name -> (environment, priority on)
VARIANTS = {
    "defaults (priority, credit auto, 4 MB partitions)": ({}, True),
    "no credit window (BYTEPS_SCHEDULING_CREDIT=0)": ({"BYTEPS_SCHEDULING_CREDIT": "0"}, True),
    "no priority": ({}, False),
    "no scheduling (no priority, no credit window)": ({"BYTEPS_SCHEDULING_CREDIT": "0"}, False),
    "partitions 1 MB": ({"BYTEPS_PARTITION_BYTES": str(1 * MB)}, True),
    "partitions 16 MB": ({"BYTEPS_PARTITION_BYTES": str(16 * MB)}, True),
}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_training_arguments(parser)
    numbered = "; ".join(f"{i}: {name}" for i, name in enumerate(VARIANTS))
    parser.add_argument("--variants", help=f"only these variants, comma-separated numbers ({numbered}); the first "
                                           "of them runs again last (default: all)")
    return parser.parse_args()


def main():
    args = parse_args()
    runs = []
    names = list(VARIANTS)
    if args.variants:
        names = [names[int(i)] for i in args.variants.split(",")]
    names.append(names[0])  # the first (the defaults) again last: the run-to-run drift
    with EmulatedCluster(cluster_job.hosts_for(args.workers, args.servers), args.rate) as cluster:
        for model in args.models.split(","):
            batch = args.batch_bert if model == "bert" else args.batch_mlp
            for name in names:
                env, priority = VARIANTS[name]
                run = run_training(cluster, "bps", model, args.workers, args.servers, batch, args.steps,
                                   args.warmup, env, no_priority=not priority)
                run["variant"] = name
                print(f"{model} {name}: {run['median_step_s'] * 1e3:.0f} ms/step", flush=True)
                runs.append(run)
    result = {"benchmark": "tuning", "rate": args.rate, "workers": args.workers, "servers": args.servers,
              "runs": runs, "machine": describe_machine()}
    print(tuning_table(result))
    save_result(args.output, result)


if __name__ == "__main__":
    main()
