"""One machine's processes of a job started by a cluster manager (cluster_managers.py): the scheduler if the plan
says so, the servers, and the worker machine's processes, supervised together as a --local job is."""

import os

from bps_tf.launcher.child_processes import KILL_GRACE_S
from bps_tf.launcher.local_job import DEFAULT_ROLE_COMMAND, Launch, Supervisor, WorkerRestarts
from bps_tf.launcher.local_env import role_environment
from bps_tf.launcher.output import PrefixedOutput, is_shown, report, worker_label, worker_rank

# Once this machine's workers are done, its scheduler and servers wait for the rest of the job, which may
# take as long as any wait may (BYTEPS_TIMEOUT), and a little more.
_DEFAULT_TIMEOUT_S = 300.0
_SHUTDOWN_MARGIN_S = 30.0


def node_launches(plan, command, output_ranks=None, role_command=DEFAULT_ROLE_COMMAND, base=None):
    """The processes `plan` puts on this machine."""
    job_env = dict(os.environ if base is None else base, **plan.job)
    for name in ("DMLC_WORKER_ID", "BYTEPS_LOCAL_SIZE", "BYTEPS_LOCAL_RANK", "DMLC_ROLE"):
        job_env.pop(name, None)
    launches = []
    if plan.scheduler:
        launches.append(Launch("scheduler", list(role_command), role_environment(job_env, "scheduler")))
    launches += [Launch(f"server {index}", list(role_command), role_environment(job_env, "server"))
                 for index in range(plan.servers)]
    if plan.worker_id is not None:
        launches += [Launch(worker_label(plan.worker_id, local_rank, plan.local_size), list(command),
                            role_environment(job_env, "worker", plan.worker_id, local_rank, plan.local_size),
                            worker=True,
                            shown=is_shown(worker_rank(plan.worker_id, local_rank, plan.local_size), output_ranks))
                     for local_rank in range(plan.local_size)]
    return launches


def run_node_plan(plan, command, output_ranks=None, max_restarts=0):
    """Runs this machine's part of the job; returns bpslaunch's exit code."""
    if plan.worker_id is not None and not command:
        report(f"this {plan.manager} task runs a worker: give the training command, e.g. `bpslaunch python train.py`")
        return 1
    roles = (["scheduler"] if plan.scheduler else []) + [f"{plan.servers} server(s)"] * bool(plan.servers)
    if plan.worker_id is not None:
        roles.append(f"worker machine {plan.worker_id} ({plan.local_size} process(es))")
    report(f"{plan.manager}: this machine runs {', '.join(roles)}; scheduler at "
           f"{plan.job['DMLC_PS_ROOT_URI']}:{plan.job['DMLC_PS_ROOT_PORT']}, {plan.job['DMLC_NUM_WORKER']} worker "
           f"machine(s), {plan.job['DMLC_NUM_SERVER']} server(s)")
    try:
        wait = float(os.environ.get("BYTEPS_TIMEOUT", "") or _DEFAULT_TIMEOUT_S)
    except ValueError:
        wait = _DEFAULT_TIMEOUT_S  # the core reports the bad value itself
    # In an elastic job this machine's scheduler and servers outlive its worker: the others go on.
    elastic = bool(os.environ.get("BYTEPS_MIN_WORKERS") or os.environ.get("BYTEPS_MAX_WORKERS"))
    supervisor = Supervisor(node_launches(plan, command, output_ranks), None, wait + _SHUTDOWN_MARGIN_S,
                            KILL_GRACE_S, PrefixedOutput(), restarts=WorkerRestarts(max_restarts) if elastic else None)
    return supervisor.run()
