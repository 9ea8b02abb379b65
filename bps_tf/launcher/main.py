"""Entry point of the `bpslaunch` console script."""

import os

from bps_tf.launcher import allocator, cluster_managers, mps
from bps_tf.launcher.arguments import parse_arguments
from bps_tf.launcher.cluster import run_cluster_role
from bps_tf.launcher.local_job import run_local_job
from bps_tf.launcher.node_job import run_node_plan
from bps_tf.launcher.output import report


def main(argv=None):
    """Runs bpslaunch with `argv` (default: sys.argv[1:]) and returns its exit code."""
    args = parse_arguments(argv)
    try:
        allocator.library(os.environ)  # (each process started from here on preloads it)
        use_mps = mps.requested(args.mps, os.environ)
    except (ValueError, mps.MpsError) as error:
        report(str(error))
        return 1
    # Every process of the job reads them: the servers hold the weights, the workers push changes.
    if args.async_training:
        os.environ["BYTEPS_ENABLE_ASYNC"] = "1"
    if args.staleness is not None:
        os.environ["BYTEPS_STALENESS"] = str(args.staleness)
    if args.backup_workers is not None:
        os.environ["BYTEPS_BACKUP_WORKERS"] = str(args.backup_workers)  # every process this one starts
    if args.local:
        return _under_mps(use_mps, lambda: run_local_job(
            args.command,
            num_workers=args.workers,
            num_servers=args.servers,
            local_size=args.local_size,
            timeout=args.timeout,
            shutdown_grace=args.shutdown_grace,
            output_ranks=args.output_ranks,
            elastic=(args.min_workers, args.max_workers) if args.elastic else None,
            max_restarts=args.max_restarts,
        ))
    try:
        plan = cluster_managers.detect(os.environ)  # SLURM or TF_CONFIG, unless DMLC_ROLE chose the role by hand
        if plan is not None:
            plan = cluster_managers.select_roles(plan, args.roles)  # bpslaunch --roles
    except cluster_managers.ClusterManagerError as error:
        report(str(error))
        return 1
    if plan is not None:
        return _under_mps(use_mps and plan.worker_id is not None and bool(args.command), lambda: run_node_plan(
            plan, args.command, output_ranks=args.output_ranks, max_restarts=args.max_restarts))
    if set(args.roles) != set(cluster_managers.ROLES):
        report("--roles applies to SLURM and TF_CONFIG jobs; with DMLC_ROLE this process plays the role it names")
        return 1
    worker = os.environ.get("DMLC_ROLE") == "worker" and bool(args.command)
    if use_mps and worker and os.environ.get("BYTEPS_LOCAL_RANK") and not os.environ.get(mps.PIPE_VARIABLE):
        report("--mps starts one MPS daemon per bpslaunch, and with BYTEPS_LOCAL_RANK set this one runs a single "
               "worker process: start the machine's workers from one bpslaunch (BYTEPS_LOCAL_SIZE=K without "
               "BYTEPS_LOCAL_RANK), or run an MPS daemon yourself and set CUDA_MPS_PIPE_DIRECTORY for them")
        return 1
    return _under_mps(use_mps and worker, lambda: run_cluster_role(args.command, output_ranks=args.output_ranks))


def _under_mps(enabled, run_job):
    """run_job()'s exit code, its processes under an MPS daemon of their own if `enabled` (launcher/mps.py)."""
    if not enabled:
        return run_job()
    try:
        return mps.run_under_daemon(os.environ, run_job)
    except mps.MpsError as error:
        report(str(error))
        return 1
