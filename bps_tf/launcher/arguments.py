"""Command-line parsing and validation for bpslaunch."""

import argparse
import os

from bps_tf.launcher.cluster_managers import ROLES
from bps_tf.launcher.local_job import DEFAULT_SHUTDOWN_GRACE_S
from bps_tf.launcher.output import parse_output_ranks

# Chooses the workers whose output is shown when --output-ranks is not given (handy in cluster mode, where
# every machine's bpslaunch gets the same environment).
OUTPUT_RANKS_VARIABLE = "BYTEPS_OUTPUT_RANKS"

_USAGE_EXAMPLES = """\
examples:
  bpslaunch --local --workers 2 --servers 1 -- python train.py
      start a scheduler, 1 server and 2 workers on this host
  bpslaunch --local --workers 2 --local-size 4 -- python train.py
      2 worker machines of 4 processes each (one per GPU: the script picks its GPU by bps_tf.local_rank())
  bpslaunch --local --workers 4 --output-ranks 0 -- python train.py
      show the output of worker rank 0 only (a failing worker's last stderr lines are still shown)
  bpslaunch --local --workers 3 --min-workers 2 --max-workers 4 --max-restarts 3 -- python train.py
      an elastic job (bps_tf.keras.elastic / bps_tf.tensorflow.elastic): it goes on when a worker is lost, and
      a lost worker or server process is started again, at most 3 times per place, and rejoins (docs/elastic.md)
  bpslaunch --local --workers 2 --mps -- python train.py
      2 worker machines sharing this host's GPU, run under NVIDIA's MPS (a daemon started for the job)
  DMLC_ROLE=worker DMLC_PS_ROOT_URI=10.0.0.1 ... bpslaunch python train.py
      play the role named by DMLC_ROLE in a cluster job; a worker with BYTEPS_LOCAL_SIZE=K (and no
      BYTEPS_LOCAL_RANK) runs K processes, BYTEPS_LOCAL_RANK=0..K-1
  srun --ntasks-per-node=1 bpslaunch python train.py
      under SLURM (no DMLC_ROLE): node 0 runs the scheduler, every node BYTEPS_SERVERS_PER_NODE servers
      (default 1) and one worker process per GPU (SLURM_GPUS_ON_NODE, or BYTEPS_LOCAL_SIZE)
  srun bpslaunch --roles scheduler,server &   then per node:
  srun --nodes=1 --nodelist=NODE bpslaunch --roles worker python train.py
      an elastic SLURM job (BYTEPS_MIN_WORKERS/BYTEPS_MAX_WORKERS): the scheduler and servers in one step, each
      node's worker in a step of its own that the batch script starts again when it fails
      (examples/slurm/bps_tf_elastic.sbatch)
  bpslaunch python train.py   (in a Kubeflow TFJob pod, with TF_CONFIG)
      the chief is worker 0 with the scheduler beside it, workers follow, ps tasks are servers (none: a
      server beside each worker); a ps pod runs `bpslaunch` without a command
  Every process of a job needs the same BYTEPS_JOB_SECRET (or BYTEPS_JOB_SECRET_FILE); --local makes one.
  More: docs/launch.md
"""


def parse_arguments(argv=None):
    """Parses and checks the arguments; exits with status 2 and a message when they are wrong."""
    parser = _build_parser()
    args = parser.parse_args(argv)
    # argparse keeps the `--` that separates our options from the user's command.
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    output_ranks_source = "--output-ranks"
    if args.output_ranks is None:
        args.output_ranks = _output_ranks_from_environment(parser)
        output_ranks_source = OUTPUT_RANKS_VARIABLE
    _max_restarts(parser, args)
    if args.staleness is not None and args.staleness < 0:
        parser.error(f"--staleness must be a whole number of steps >= 0 (0 behaves synchronously), got "
                     f"{args.staleness}")
    if args.local:
        _check_local_arguments(parser, args)
        _check_output_ranks_exist(parser, args, output_ranks_source)
    else:
        _check_cluster_arguments(parser, args)
    return args


def _build_parser():
    parser = argparse.ArgumentParser(
        prog="bpslaunch",
        description="Launch a bps_tf job: a whole job on this host with --local, this machine's part of a SLURM or "
                    "Kubeflow (TF_CONFIG) job, or one role from DMLC_* variables.",
        epilog=_USAGE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--local", action="store_true",
                        help="start the scheduler, servers and workers on this host")
    parser.add_argument("--workers", type=int, metavar="N", help="--local: number of worker machines (default 1)")
    parser.add_argument("--local-size", type=int, metavar="K",
                        help="--local: worker processes per worker machine, e.g. one per GPU (default 1)")
    parser.add_argument("--servers", type=int, metavar="M", help="--local: number of servers (default 1)")
    parser.add_argument("--timeout", type=float, metavar="S",
                        help="--local: stop the whole job and fail after S seconds")
    parser.add_argument("--shutdown-grace", type=float, metavar="S",
                        help="--local: how long the scheduler and servers may take to exit after the workers "
                             "finished (in an elastic job also the workers after the job ended), before they are "
                             f"killed (default {DEFAULT_SHUTDOWN_GRACE_S:g})")
    parser.add_argument("--min-workers", type=int, metavar="M",
                        help="--local: an elastic job that goes on with at least M workers (BYTEPS_MIN_WORKERS; "
                             "default 1 when --max-workers is given); below M it waits BYTEPS_ELASTIC_TIMEOUT "
                             "(600 s) for workers, then fails")
    parser.add_argument("--max-workers", type=int, metavar="X",
                        help="--local: an elastic job that takes workers that join, up to X (BYTEPS_MAX_WORKERS; "
                             "default: --workers when --min-workers is given)")
    parser.add_argument("--backup-workers", type=int, metavar="B",
                        help="each round of a gradient completes with the first N - B workers' pushes and the "
                             "late ones are dropped (BYTEPS_BACKUP_WORKERS, set for every process; default 0: "
                             "every push is summed); 0 <= B < the job's worker processes")
    parser.add_argument("--max-restarts", type=int, metavar="K",
                        help="elastic jobs: start a worker or server process that failed again, at most K times "
                             "per place (default 0); it rejoins the job")
    parser.add_argument("--roles", type=_roles_argument, metavar="ROLES",
                        help="SLURM and TF_CONFIG jobs: of this machine's processes, start only these roles "
                             "(comma-separated: scheduler, server, worker; default: all of them), e.g. the "
                             "scheduler and servers as one SLURM step and each node's worker as a step of its own")
    parser.add_argument("--output-ranks", type=_output_ranks_argument, metavar="RANKS",
                        help="show the output of these worker ranks only, e.g. 0 or 0,2 (rank = machine x "
                             "local size + local rank; default: every worker, or $" + OUTPUT_RANKS_VARIABLE
                             + "). Other workers' output is dropped, except the last lines of stderr of one "
                             "that fails; launcher, scheduler and server output is always shown")
    parser.add_argument("--async", dest="async_training", action="store_true",
                        help="asynchronous training (BYTEPS_ENABLE_ASYNC=1): the servers hold the weights, each "
                             "worker pushes the change of its weights after its own optimizer step and goes on from "
                             "the servers' weights, waiting for no other worker")
    parser.add_argument("--staleness", type=int, metavar="S",
                        help="bounded staleness (BYTEPS_STALENESS=S, implies --async): no worker gets more than S "
                             "steps ahead of the slowest; 0 behaves synchronously")
    parser.add_argument("--mps", action="store_true",
                        help="run this machine's worker processes under NVIDIA's Multi-Process Service "
                             "(BYTEPS_MPS=1): bpslaunch starts an MPS control daemon for the job and quits it when "
                             "the job ends; for worker processes that share a GPU (docs/launch.md)")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="the training command, e.g. python train.py (after -- with --local)")
    return parser


def _check_local_arguments(parser, args):
    args.workers = 1 if args.workers is None else args.workers
    args.servers = 1 if args.servers is None else args.servers
    args.local_size = 1 if args.local_size is None else args.local_size
    if args.shutdown_grace is None:
        args.shutdown_grace = DEFAULT_SHUTDOWN_GRACE_S
    if args.workers < 1:
        parser.error(f"--workers must be at least 1, got {args.workers}")
    if args.local_size < 1:
        parser.error(f"--local-size must be at least 1, got {args.local_size}")
    if args.servers < 1:
        parser.error(f"--servers must be at least 1, got {args.servers}")
    if args.timeout is not None and args.timeout <= 0:
        parser.error(f"--timeout must be positive, got {args.timeout:g}")
    if args.shutdown_grace < 0:
        parser.error(f"--shutdown-grace must not be negative, got {args.shutdown_grace:g}")
    processes = args.workers * args.local_size
    if args.backup_workers is not None and not 0 <= args.backup_workers < processes:
        parser.error(f"--backup-workers must be in [0, {processes}) (the job's worker processes less at least one "
                     f"that sums), got {args.backup_workers}")
    if not args.command:
        parser.error("--local needs the command to run after --, e.g. bpslaunch --local -- python train.py")
    if args.roles is not None:
        parser.error("--roles applies to SLURM and TF_CONFIG jobs: --local starts every role")
    _check_elastic_arguments(parser, args)


def _check_elastic_arguments(parser, args):
    """--min-workers/--max-workers make the job elastic: 1 <= min <= workers <= max (workers counts machines of
    one process each)."""
    args.elastic = args.min_workers is not None or args.max_workers is not None
    if not args.elastic:
        if args.max_restarts:
            parser.error("--max-restarts starts lost workers again, which only an elastic job takes back: give "
                         "--min-workers and/or --max-workers too")
        return
    args.min_workers = 1 if args.min_workers is None else args.min_workers
    args.max_workers = args.workers if args.max_workers is None else args.max_workers
    if not 1 <= args.min_workers <= args.workers:
        parser.error(f"--min-workers must be in [1, --workers={args.workers}], got {args.min_workers}")
    if args.max_workers < args.workers:
        parser.error(f"--max-workers must be at least --workers={args.workers}, got {args.max_workers}")
    if args.local_size != 1:
        parser.error("an elastic job runs one worker process per machine: --local-size 1")


def _check_cluster_arguments(parser, args):
    if args.roles is None:
        args.roles = ROLES
    local_only = {"--workers": args.workers, "--local-size": args.local_size, "--servers": args.servers,
                  "--timeout": args.timeout, "--shutdown-grace": args.shutdown_grace,
                  "--min-workers": args.min_workers, "--max-workers": args.max_workers}
    given = [name for name, value in local_only.items() if value is not None]
    if given:
        hint = " (in a cluster job, set BYTEPS_MIN_WORKERS and BYTEPS_MAX_WORKERS on every process)" \
            if args.min_workers is not None or args.max_workers is not None else ""
        parser.error(f"{', '.join(given)} only apply with --local{hint}")


def _max_restarts(parser, args):
    if args.max_restarts is None:
        args.max_restarts = 0
    if args.max_restarts < 0:
        parser.error(f"--max-restarts must not be negative, got {args.max_restarts}")


def _roles_argument(text):
    roles = tuple(role.strip() for role in text.split(",") if role.strip())
    unknown = [role for role in roles if role not in ROLES]
    if not roles or unknown:
        raise argparse.ArgumentTypeError(f"{text!r}: give one or more of {', '.join(ROLES)}, comma-separated")
    return roles


def _output_ranks_argument(text):
    try:
        return parse_output_ranks(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _output_ranks_from_environment(parser):
    """The ranks in BYTEPS_OUTPUT_RANKS, or None (every worker) when it is unset or empty."""
    text = os.environ.get(OUTPUT_RANKS_VARIABLE, "").strip()
    if not text:
        return None
    try:
        return parse_output_ranks(text)
    except ValueError as error:
        parser.error(f"{OUTPUT_RANKS_VARIABLE}: {error}")


def _check_output_ranks_exist(parser, args, source):
    """A rank beyond the job is most likely a typo, and would hide every worker."""
    num_ranks = args.workers * args.local_size
    missing = sorted(rank for rank in args.output_ranks or () if rank >= num_ranks)
    if missing:
        parser.error(f"{source}: no worker has rank {', '.join(map(str, missing))}; this job has ranks "
                     f"0..{num_ranks - 1}")
