"""The roles of this machine in a job started by a cluster manager, from the environment the manager gives:
SLURM (`srun --ntasks-per-node=1 bpslaunch CMD`) or Kubeflow's TFJob (TF_CONFIG). Each becomes a NodePlan:
the DMLC_* variables the job's processes share, and which processes this machine runs. `bpslaunch --roles`
keeps some of them (select_roles): an elastic SLURM job runs the scheduler and servers as one step and each
node's worker as a step of its own, which can fail and be started again while the others go on."""

import json
import os
import re
import zlib
from dataclasses import dataclass, field

# The scheduler's port under SLURM when DMLC_PS_ROOT_PORT is not set: derived from the job id, so that every
# node computes the same one and two jobs sharing a node rarely collide.
_SLURM_PORT_BASE, _SLURM_PORT_SPAN = 20000, 20000


ROLES = ("scheduler", "server", "worker")


class ClusterManagerError(ValueError):
    """The cluster manager's environment does not describe a job bpslaunch can run; says what to change."""


@dataclass
class NodePlan:
    """What this machine runs: the scheduler or not, `servers` servers, and the worker machine `worker_id`
    (None: no worker) of `local_size` processes; `job` holds the variables every process shares."""
    manager: str
    job: dict
    scheduler: bool = False
    servers: int = 0
    worker_id: int = None
    local_size: int = 1
    notes: list = field(default_factory=list)
    # SLURM: this step runs on some of the job's nodes only (srun --nodes=1 --nodelist=NODE): workers only.
    partial_step: bool = False


def detect(env):
    """The plan of the cluster manager that started this process, or None when none did (or DMLC_ROLE is set: the
    roles were chosen by hand)."""
    if env.get("DMLC_ROLE"):
        return None
    if env.get("TF_CONFIG"):
        return plan_from_tf_config(env)
    if env.get("SLURM_PROCID") is not None and (env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")):
        return plan_from_slurm(env)
    return None


def _positive(env, name, default):
    text = env.get(name, "").strip()
    if not text:
        return default
    if not text.isdigit() or int(text) < 1:
        raise ClusterManagerError(f"{name} must be a positive integer, got {text!r}")
    return int(text)


def _elastic(env):
    return bool(env.get("BYTEPS_MIN_WORKERS", "").strip() or env.get("BYTEPS_MAX_WORKERS", "").strip())


def _local_size(env, default):
    """Worker processes per machine: BYTEPS_LOCAL_SIZE, else `default`; an elastic job runs one per machine (it
    drives the machine's devices itself: BytePSStrategy)."""
    if not _elastic(env):
        return _positive(env, "BYTEPS_LOCAL_SIZE", default)
    local_size = _positive(env, "BYTEPS_LOCAL_SIZE", 1)
    if local_size != 1:
        raise ClusterManagerError(f"BYTEPS_LOCAL_SIZE={local_size}, but an elastic job (BYTEPS_MIN_WORKERS/"
                                  "BYTEPS_MAX_WORKERS) runs one worker process per machine: set BYTEPS_LOCAL_SIZE=1 "
                                  "and let that process use the machine's GPUs (BytePSStrategy)")
    return 1


def select_roles(plan, roles):
    """`plan` keeping only `roles` (of ROLES): the scheduler if it has one, its servers, its worker machine.
    Raises ClusterManagerError when nothing would be left to run, or when a SLURM step on some of the job's nodes
    would run the scheduler or servers: the job counts servers on every node (DMLC_NUM_SERVER), so the step
    that runs them spans the job."""
    unknown = sorted(set(roles) - set(ROLES))
    if unknown:
        raise ClusterManagerError(f"--roles: unknown role(s) {', '.join(unknown)}; choose from {', '.join(ROLES)}")
    kept = NodePlan(plan.manager, dict(plan.job), scheduler=plan.scheduler and "scheduler" in roles,
                    servers=plan.servers if "server" in roles else 0,
                    worker_id=plan.worker_id if "worker" in roles else None, local_size=plan.local_size,
                    notes=list(plan.notes), partial_step=plan.partial_step)
    if kept.partial_step and (kept.scheduler or kept.servers):
        raise ClusterManagerError("this SLURM step runs on some of the job's nodes only, but it would start the "
                                  "scheduler or servers, which the job expects on every node: run them as one step "
                                  "on all nodes (srun bpslaunch --roles scheduler,server), and each node's worker "
                                  "as a step of its own (srun --nodes=1 --nodelist=NODE bpslaunch --roles worker CMD)")
    if not kept.scheduler and not kept.servers and kept.worker_id is None:
        has = (["the scheduler"] if plan.scheduler else []) + ([f"{plan.servers} server(s)"] if plan.servers else []) \
            + ([f"worker machine {plan.worker_id}"] if plan.worker_id is not None else [])
        raise ClusterManagerError(f"--roles {','.join(roles)} leaves nothing to run here: this machine's part of the "
                                  f"{plan.manager} job is {', '.join(has)}")
    return kept


def _require_secret(env, manager, how):
    if not env.get("BYTEPS_JOB_SECRET") and not env.get("BYTEPS_JOB_SECRET_FILE"):
        raise ClusterManagerError(f"a {manager} job needs the job's secret on every process: {how}")


# --- SLURM ---------------------------------------------------------------------------------------------

def expand_hostlist(hostlist):
    """SLURM's compressed host list ("gpu[01-03,07],cpu-a[1-2]b") as host names, in order."""
    hosts = []
    for item in _top_level_items(hostlist):
        hosts.extend(_expand_item(item))
    return hosts


def _top_level_items(hostlist):
    items, depth, current = [], 0, ""
    for char in hostlist.strip():
        if char == "," and depth == 0:
            items.append(current)
            current = ""
            continue
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth < 0 or depth > 1:
            raise ClusterManagerError(f"cannot read the SLURM host list {hostlist!r}")
        current += char
    if depth != 0:
        raise ClusterManagerError(f"cannot read the SLURM host list {hostlist!r}")
    return [item for item in items + [current] if item]


def _expand_item(item):
    match = re.match(r"^([^\[]*)\[([^\]]*)\](.*)$", item)
    if not match:
        return [item]
    prefix, ranges, rest = match.groups()
    tails = _expand_item(rest) if rest else [""]
    return [prefix + number + tail for number in _numbers(ranges) for tail in tails]


def _numbers(ranges):
    """"01-03,07" as ["01", "02", "03", "07"] (zero padding kept)."""
    numbers = []
    for part in ranges.split(","):
        bounds = part.split("-")
        if len(bounds) == 1 and bounds[0].isdigit():
            numbers.append(bounds[0])
        elif len(bounds) == 2 and all(b.isdigit() for b in bounds) and int(bounds[0]) <= int(bounds[1]):
            numbers.extend(str(n).zfill(len(bounds[0])) for n in range(int(bounds[0]), int(bounds[1]) + 1))
        else:
            raise ClusterManagerError(f"cannot read the range [{ranges}] in the SLURM host list")
    return numbers


def plan_from_slurm(env):
    """One bpslaunch per node (`srun --ntasks-per-node=1`): node 0 also runs the scheduler; every node runs
    BYTEPS_SERVERS_PER_NODE servers (default 1) and one worker machine of BYTEPS_LOCAL_SIZE processes (default:
    SLURM_GPUS_ON_NODE, else 1; an elastic job: 1).

    A node's place is its index in the job's node list (SLURMD_NODENAME, else SLURM_NODEID), so that a step
    on some of the job's nodes (`srun --nodes=1 --nodelist=NODE bpslaunch --roles worker CMD`) runs that
    node's worker machine; a step that runs servers or the scheduler spans every node of the job."""
    nodes = expand_hostlist(env.get("SLURM_JOB_NODELIST") or env["SLURM_NODELIST"])
    step_nodes = _positive(env, "SLURM_STEP_NUM_NODES", _positive(env, "SLURM_NNODES", len(nodes)))
    tasks = _positive(env, "SLURM_STEP_NUM_TASKS", _positive(env, "SLURM_NTASKS", step_nodes))
    node_name = env.get("SLURMD_NODENAME", "").strip()
    node_id = nodes.index(node_name) if node_name in nodes else int(env.get("SLURM_NODEID", "0"))
    if tasks != step_nodes:
        raise ClusterManagerError(f"SLURM started {tasks} tasks on {step_nodes} nodes; bpslaunch runs once per node and "
                                  "starts that node's processes itself: srun --ntasks-per-node=1 bpslaunch CMD")
    if not 0 <= node_id < len(nodes):
        raise ClusterManagerError(f"SLURM_NODEID {node_id} is not a node of SLURM_JOB_NODELIST ({len(nodes)} nodes)")
    _require_secret(env, "SLURM", "export BYTEPS_JOB_SECRET=$(openssl rand -hex 32) in the batch script before "
                                  "srun (srun passes it on), or point BYTEPS_JOB_SECRET_FILE at a file every node reads")
    servers_per_node = _positive(env, "BYTEPS_SERVERS_PER_NODE", 1)
    gpus = env.get("SLURM_GPUS_ON_NODE", "").strip()
    local_size = _local_size(env, int(gpus) if gpus.isdigit() and int(gpus) > 0 else 1)
    port = env.get("DMLC_PS_ROOT_PORT") or str(
        _SLURM_PORT_BASE + zlib.crc32(env.get("SLURM_JOB_ID", "0").encode()) % _SLURM_PORT_SPAN)
    job = {
        "DMLC_PS_ROOT_URI": nodes[0],
        "DMLC_PS_ROOT_PORT": port,
        "DMLC_NUM_WORKER": str(len(nodes)),
        "DMLC_NUM_SERVER": str(len(nodes) * servers_per_node),
        "DMLC_NODE_HOST": env.get("DMLC_NODE_HOST") or nodes[node_id],
    }
    return NodePlan("SLURM", job, scheduler=node_id == 0, servers=servers_per_node, worker_id=node_id,
                    local_size=local_size, partial_step=step_nodes != len(nodes))


# --- TF_CONFIG (Kubeflow TFJob) ------------------------------------------------------------------------

def _split_address(address, where):
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ClusterManagerError(f"TF_CONFIG: {where} is {address!r}, not host:port")
    return host, port


def plan_from_tf_config(env):
    """TF_CONFIG's chief and workers are bps_tf's worker machines (the chief is worker 0); its ps tasks are
    servers (none: one server beside each worker); the scheduler runs beside worker 0 on the port TF_CONFIG
    gives that task."""
    try:
        config = json.loads(env["TF_CONFIG"])
        cluster, task = config["cluster"], config["task"]
        task_type, index = task["type"], int(task.get("index", 0))
    except (ValueError, KeyError, TypeError) as error:
        raise ClusterManagerError(f"TF_CONFIG is not a TensorFlow cluster description ({error}): it needs "
                          "{\"cluster\": {...}, \"task\": {\"type\": ..., \"index\": ...}}") from None
    workers = list(cluster.get("chief", [])) + list(cluster.get("worker", []))
    ps = list(cluster.get("ps", []))
    if not workers:
        raise ClusterManagerError("TF_CONFIG's cluster has no chief and no worker: bps_tf needs at least one worker")
    if task_type == "evaluator":
        raise ClusterManagerError("TF_CONFIG task type 'evaluator' takes no part in a bps_tf job: evaluate in the training "
                          "job (every worker), or run the evaluator without bpslaunch")
    if task_type not in ("chief", "worker", "ps"):
        raise ClusterManagerError(f"TF_CONFIG task type {task_type!r}: bpslaunch knows chief, worker and ps")
    members = {"chief": cluster.get("chief", []), "worker": cluster.get("worker", []), "ps": ps}[task_type]
    if not 0 <= index < len(members):
        raise ClusterManagerError(f"TF_CONFIG task {task_type}:{index} is not in the cluster ({len(members)} {task_type})")
    _require_secret(env, "TFJob", "give every replica BYTEPS_JOB_SECRET from one Kubernetes Secret (env valueFrom "
                                  "secretKeyRef, or a mounted file named by BYTEPS_JOB_SECRET_FILE)")
    root_host, root_port = _split_address(workers[0], "the first worker's address")
    own_host, _ = _split_address(members[index], f"{task_type}:{index}'s address")
    job = {
        "DMLC_PS_ROOT_URI": root_host,
        "DMLC_PS_ROOT_PORT": env.get("DMLC_PS_ROOT_PORT") or root_port,
        "DMLC_NUM_WORKER": str(len(workers)),
        "DMLC_NUM_SERVER": str(len(ps) or len(workers)),
        "DMLC_NODE_HOST": env.get("DMLC_NODE_HOST") or own_host,
    }
    if task_type == "ps":
        return NodePlan("TF_CONFIG", job, servers=1)
    worker_id = index + (len(cluster.get("chief", [])) if task_type == "worker" else 0)
    return NodePlan("TF_CONFIG", job, scheduler=worker_id == 0, servers=0 if ps else 1, worker_id=worker_id,
                    local_size=_local_size(env, 1))
