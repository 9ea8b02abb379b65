"""Elastic jobs started as Kubeflow's TFJob starts them: one bpslaunch per pod with that pod's TF_CONFIG and the
elastic variables (the chief runs worker 0 and the scheduler, the ps pod a server, the worker pod worker 1).
A pod restarted by its restart policy is the same command with the same TF_CONFIG started again; a pod
rescheduled elsewhere also advertises a new address. The pods' and the SLURM steps' plans for those layouts
are checked here too (bpslaunch --roles)."""

import json
import os
import re
import secrets
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from bps_tf.launcher import cluster_managers
from testing.elastic_jobs import processes_with
from testing.jobs import BPSLAUNCH, REPO_ROOT, WORKERS_DIR, clean_env, free_port, kill_process_groups

PYTHON = str(REPO_ROOT / ".venv" / "bin" / "python")
STEPS, STEP_SECONDS = 300, 0.05
# bpslaunch's exit code when its worker was killed by SIGKILL (128 + 9): a retryable failure for the
# training operator's ExitCode restart policy.
KILLED_EXIT_CODE = 137


class TFJobPods:
    """The pods of an elastic TFJob (chief, worker 0, ps 0) as bpslaunch processes on this host, each with the
    TF_CONFIG the training operator would give it, running tests/workers/elastic_sums.py."""

    TASKS = (("chief", 0), ("worker", 0), ("ps", 0))

    def __init__(self, **env):
        self._directory = tempfile.TemporaryDirectory(prefix="bps_tf_tfjob_")
        self.log_dir = Path(self._directory.name)
        self.cluster = {"chief": [f"localhost:{free_port()}"], "worker": ["localhost:2222"], "ps": ["localhost:2223"]}
        self.base = dict(BYTEPS_JOB_SECRET=secrets.token_hex(16), BYTEPS_MIN_WORKERS=1, BYTEPS_MAX_WORKERS=2, **env)
        self.processes = {}  # (task type, index) -> [Popen of each start of that pod; the last one runs]
        for task_type, index in self.TASKS:
            self.start(task_type, index)

    def start(self, task_type, index, **extra):
        """Starts the pod's container: bpslaunch with its TF_CONFIG (again, after a restart)."""
        starts = self.processes.setdefault((task_type, index), [])
        tf_config = json.dumps({"cluster": self.cluster, "task": {"type": task_type, "index": index}})
        # As in examples/kubernetes/tfjob_elastic.yaml: the chief starts its own worker and scheduler again,
        # the worker pods rely on their restart policy.
        command = [BPSLAUNCH] + (["--max-restarts", 3] if task_type == "chief" else [])
        if task_type != "ps":
            command += [PYTHON, WORKERS_DIR / "elastic_sums.py", STEPS, self.log_dir, STEP_SECONDS]
        output = open(self.log_dir / f"{task_type}-{index}.{len(starts)}.log", "w")
        starts.append(subprocess.Popen([str(part) for part in command],
                                       env=clean_env(TF_CONFIG=tf_config, **self.base, **extra),
                                       stdout=output, stderr=subprocess.STDOUT, text=True, start_new_session=True))
        output.close()

    def output(self, task_type, index):
        """The pod's output over all its starts."""
        return "".join((self.log_dir / f"{task_type}-{index}.{n}.log").read_text(errors="replace")
                       for n in range(len(self.processes[(task_type, index)])))

    def outputs(self):
        return "\n".join(f"--- {task_type} {index}:\n{self.output(task_type, index)[-3000:]}"
                         for task_type, index in self.processes)

    def training_process(self, worker_id):
        """Pid of the training process of worker machine `worker_id` (a child of its pod's bpslaunch)."""
        found = [pid for pid, env in processes_with(str(self.log_dir)).items()
                 if env.get("DMLC_ROLE") == "worker" and env.get("DMLC_WORKER_ID") == str(worker_id)]
        return found[0] if found else None

    def latest_step(self, worker_id):
        try:
            step, size = (self.log_dir / f"step.{worker_id}").read_text().split()
            return int(step), int(size)
        except (OSError, ValueError):
            return None

    def wait_until(self, condition, what, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = condition()
            if value:
                return value
            if all(starts[-1].poll() is not None for starts in self.processes.values()):
                break
            time.sleep(0.05)
        raise AssertionError(f"{what} not seen within {timeout} s\n{self.outputs()}")

    def wait(self, task_type, index, timeout):
        """Exit code of the pod's last start."""
        process = self.processes[(task_type, index)][-1]
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{task_type} {index} still runs after {timeout} s; running: {self.running()}\n"
                                 f"{self.outputs()}") from None

    def running(self):
        """The pods' processes still running and their children's command lines, for failure messages."""
        children = {}
        for entry in Path("/proc").iterdir():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append((entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
            except (OSError, ValueError, IndexError):
                continue
        return {task: children.get(starts[-1].pid, []) for task, starts in self.processes.items()
                if starts[-1].poll() is None}

    def close(self):
        for starts in self.processes.values():
            kill_process_groups(starts)
        self._directory.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


FINAL_LINE = r"\[worker (\d)\] rank (\d): model (\w+) after (\d+) steps with (\d) workers"


def _assert_rejoined_and_ended_alike(pods, survivor, codes):
    chief, worker, ps = (pods.output(*task) for task in TFJobPods.TASKS)
    outputs = pods.outputs()
    assert codes == {task: 0 for task in TFJobPods.TASKS}, (codes, outputs)
    survivor_output = chief if survivor == 0 else worker
    changes = re.findall(rf"\[worker {survivor}\] bps_tf\.elastic: the job's workers changed: generation (\d+) has "
                         r"(\d+) workers", survivor_output)
    assert changes == [("2", "1"), ("3", "2")], outputs  # alone, then with the restarted worker
    ends = re.findall(FINAL_LINE, chief) + re.findall(FINAL_LINE, worker)
    assert sorted(end[0] for end in ends) == ["0", "1"], outputs
    assert len({end[2] for end in ends}) == 1, f"the models differ: {ends}"
    assert all(end[3] == str(STEPS) and end[4] == "2" for end in ends), ends
    assert "TF_CONFIG: this machine runs 1 server(s)" in ps, outputs


@pytest.mark.timeout(300)
@pytest.mark.parametrize("restart", ["in_place", "rescheduled"])
def test_a_tfjob_worker_pod_killed_and_started_again_with_its_tf_config_rejoins(restart):
    """kill -9 of the worker pod's training process mid-training: the pod's bpslaunch fails with 137 (its
    container fails, and the restart policy starts it again: OnFailure in the same pod, ExitCode as a new pod
    that may have a new address), the chief's worker goes on alone, the pod started again with the same
    TF_CONFIG rejoins, and both workers end with the same model."""
    # A rescheduled pod has a new IP: here another loopback address, given as the pod's own (status.podIP).
    new_address = {"DMLC_NODE_HOST": "127.0.0.2"} if restart == "rescheduled" else {}
    with TFJobPods() as pods:
        pods.wait_until(lambda: (pods.latest_step(1) or (0, 0))[0] >= 20, "worker 1 at step 20")
        os.kill(pods.training_process(1), signal.SIGKILL)
        assert pods.wait("worker", 0, timeout=30) == KILLED_EXIT_CODE, pods.outputs()
        pods.start("worker", 0, **new_address)
        codes = {task: pods.wait(*task, timeout=200) for task in TFJobPods.TASKS}
        _assert_rejoined_and_ended_alike(pods, 0, codes)
        worker = pods.output("worker", 0)
    assert worker.count("TF_CONFIG: this machine runs worker machine 1") == 2, worker[-3000:]  # started twice


@pytest.mark.timeout(300)
def test_the_chief_pod_starts_its_killed_worker_again_and_it_rejoins():
    """kill -9 of the chief's training process: the chief's bpslaunch (--max-restarts) starts it again beside
    the scheduler, which keeps running; worker 1 goes on alone meanwhile, and the new worker 0 rejoins."""
    with TFJobPods() as pods:
        pods.wait_until(lambda: (pods.latest_step(0) or (0, 0))[0] >= 20, "worker 0 at step 20")
        os.kill(pods.training_process(0), signal.SIGKILL)
        codes = {task: pods.wait(*task, timeout=200) for task in TFJobPods.TASKS}
        _assert_rejoined_and_ended_alike(pods, 1, codes)
        chief = pods.output("chief", 0)
    assert "worker 0 was killed by SIGKILL; starting it again (restart 1 of 3): it rejoins the job" in chief, chief


@pytest.mark.timeout(300)
def test_the_chief_pod_lost_and_started_again_rebuilds_the_job_and_training_goes_on():
    """The chief pod goes (bpslaunch, the scheduler and worker 0 killed) and its restart policy starts it again
    with the same TF_CONFIG: the worker and ps pods wait for the scheduler, register again with the new one,
    which rebuilds the job with the new worker 0, and both workers end with the same model."""
    with TFJobPods() as pods:
        pods.wait_until(lambda: (pods.latest_step(1) or (0, 0))[0] >= 20, "worker 1 at step 20")
        os.killpg(pods.processes[("chief", 0)][-1].pid, signal.SIGKILL)
        pods.processes[("chief", 0)][-1].wait()
        pods.start("chief", 0)
        codes = {task: pods.wait(*task, timeout=200) for task in TFJobPods.TASKS}
        outputs = pods.outputs()
        chief, worker = pods.output("chief", 0), pods.output("worker", 0)
    assert codes == {task: 0 for task in TFJobPods.TASKS}, (codes, outputs)
    assert re.search(r"\[scheduler\] .*the job goes on with this scheduler: generation 2 forms from the 2 worker\(s\) "
                     r"and 1 server\(s\) that registered again after generation 1 lost its scheduler", chief), outputs
    # worker 1 holds the state: it ranks first in the rebuilt job, and the new worker 0 takes it
    assert re.search(r"\[worker 1\] bps_tf\.elastic: the job's workers changed: generation 2 has 2 workers; this "
                     r"worker is rank 0", worker), outputs
    ends = re.findall(FINAL_LINE, chief) + re.findall(FINAL_LINE, worker)
    assert sorted(end[0] for end in ends) == ["0", "1"], outputs
    assert len({end[2] for end in ends}) == 1, f"the models differ: {ends}"
    assert all(end[3] == str(STEPS) and end[4] == "2" for end in ends), ends


@pytest.mark.timeout(120)
def test_losing_the_chief_pod_for_good_fails_every_other_pod_within_the_elastic_timeout():
    """The chief pod goes and nothing starts it again: the worker pod and the ps pod wait
    BYTEPS_ELASTIC_TIMEOUT for a scheduler, then fail saying that none came back."""
    elastic_timeout = 8
    with TFJobPods(BYTEPS_ELASTIC_TIMEOUT=elastic_timeout) as pods:
        pods.wait_until(lambda: (pods.latest_step(1) or (0, 0))[0] >= 10, "worker 1 at step 10")
        os.killpg(pods.processes[("chief", 0)][-1].pid, signal.SIGKILL)
        lost_at = time.monotonic()
        codes = {task: pods.wait(*task, timeout=60) for task in (("worker", 0), ("ps", 0))}
        took = time.monotonic() - lost_at
        outputs = pods.outputs()
        each = [pods.output(task, 0) for task in ("worker", "ps")]
    assert all(code != 0 for code in codes.values()), (codes, outputs)
    assert took < elastic_timeout + 15, (took, outputs)
    for output in each:
        assert re.search(r"no scheduler came back at \S+ within BYTEPS_ELASTIC_TIMEOUT=8 s", output), outputs
    print(f"the worker and ps pods exited with {codes} {took:.1f} s after the chief's loss")


# --- Plans: which processes each pod and each SLURM step starts ----------------------------------------

def _slurm_step(node, nodes, step_nodes=None, **extra):
    """The environment srun gives a task on `node` of a job on `nodes`; `step_nodes`: the step's nodes."""
    step_nodes = step_nodes or nodes
    return dict(SLURM_PROCID=str(step_nodes.index(node)), SLURM_NODEID=str(step_nodes.index(node)),
                SLURM_NTASKS=str(len(step_nodes)), SLURM_NNODES=str(len(step_nodes)),
                SLURM_STEP_NUM_NODES=str(len(step_nodes)), SLURM_STEP_NUM_TASKS=str(len(step_nodes)),
                SLURM_JOB_NODELIST=",".join(nodes), SLURM_STEP_NODELIST=",".join(step_nodes),
                SLURMD_NODENAME=node, SLURM_JOB_ID="4242", BYTEPS_JOB_SECRET="s" * 16,
                BYTEPS_MIN_WORKERS="1", BYTEPS_MAX_WORKERS=str(len(nodes)), SLURM_GPUS_ON_NODE="8", **extra)


def test_the_elastic_slurm_layout_one_servers_step_and_a_worker_step_per_node():
    nodes = ["gpu01", "gpu02", "gpu03"]
    servers = [cluster_managers.select_roles(cluster_managers.detect(_slurm_step(node, nodes)), ("scheduler", "server"))
               for node in nodes]
    assert [(plan.scheduler, plan.servers, plan.worker_id) for plan in servers] == \
        [(True, 1, None), (False, 1, None), (False, 1, None)]
    # Each worker step runs on one node (its SLURM_NODEID is 0 there): the node's name gives its place.
    workers = [cluster_managers.select_roles(cluster_managers.detect(_slurm_step(node, nodes, [node])), ("worker",))
               for node in nodes]
    assert [(plan.scheduler, plan.servers, plan.worker_id, plan.local_size) for plan in workers] == \
        [(False, 0, 0, 1), (False, 0, 1, 1), (False, 0, 2, 1)]
    for plan in servers + workers:
        assert plan.job == dict(servers[0].job, DMLC_NODE_HOST=plan.job["DMLC_NODE_HOST"])
    assert [plan.job["DMLC_NODE_HOST"] for plan in workers] == nodes


@pytest.mark.parametrize("env, roles, message", [
    (_slurm_step("gpu02", ["gpu01", "gpu02"], ["gpu02"]), cluster_managers.ROLES, "some of the job's nodes only"),
    (_slurm_step("gpu02", ["gpu01", "gpu02"]), ("scheduler",), "leaves nothing to run"),
    (_slurm_step("gpu01", ["gpu01", "gpu02"], BYTEPS_LOCAL_SIZE="8"), cluster_managers.ROLES, "BYTEPS_LOCAL_SIZE=1"),
])
def test_elastic_slurm_mistakes_say_what_to_change(env, roles, message):
    with pytest.raises(cluster_managers.ClusterManagerError, match=message):
        cluster_managers.select_roles(cluster_managers.detect(env), roles)


def test_the_elastic_sbatch_example_restarts_worker_steps_beside_one_servers_step():
    script = (REPO_ROOT / "examples" / "slurm" / "bps_tf_elastic.sbatch").read_text()
    assert re.search(r"^srun --overlap .*bpslaunch --max-restarts \"\$MAX_RESTARTS\" --roles scheduler,server &$", script,
                     re.MULTILINE)
    assert re.search(r"srun --nodes=1 --ntasks=1 --nodelist=\"\$node\" .*\n\s*bpslaunch --roles worker python \"\$@\"",
                     script)
    assert "export BYTEPS_MIN_WORKERS=" in script and "export BYTEPS_MAX_WORKERS=" in script
    assert script.rstrip().endswith('wait "$servers"')


def test_bpslaunch_refuses_roles_where_it_has_no_meaning():
    local = subprocess.run([BPSLAUNCH, "--local", "--roles", "worker", "--", "true"], capture_output=True, text=True,
                           env=clean_env(), timeout=60)
    assert local.returncode == 2 and "--roles applies to SLURM and TF_CONFIG jobs" in local.stderr
    by_hand = subprocess.run([BPSLAUNCH, "--roles", "server"], capture_output=True, text=True, timeout=60,
                             env=clean_env(DMLC_ROLE="server"))
    assert by_hand.returncode == 1 and "with DMLC_ROLE" in by_hand.stderr + by_hand.stdout
    unknown = subprocess.run([BPSLAUNCH, "--roles", "servers"], capture_output=True, text=True, timeout=60,
                             env=clean_env())
    assert unknown.returncode == 2 and "one or more of scheduler, server, worker" in unknown.stderr


def test_the_elastic_tfjob_manifest_keeps_servers_off_the_worker_pods_that_restart():
    manifest = yaml.safe_load((REPO_ROOT / "examples" / "kubernetes" / "tfjob_elastic.yaml").read_text())
    replicas = manifest["spec"]["tfReplicaSpecs"]
    cluster = {name.lower(): [f"{manifest['metadata']['name']}-{name.lower()}-{i}.default.svc:2222"
                              for i in range(spec["replicas"])] for name, spec in replicas.items()}
    plans, elastic = {}, set()
    for name, spec in replicas.items():
        container = spec["template"]["spec"]["containers"][0]
        env = {e["name"]: e for e in container["env"]}
        assert env["DMLC_NODE_HOST"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
        assert env["BYTEPS_JOB_SECRET"]["valueFrom"]["secretKeyRef"]["name"] == "bps-tf-job-secret"
        elastic.add((env["BYTEPS_MIN_WORKERS"]["value"], env["BYTEPS_MAX_WORKERS"]["value"]))
        process_env = {k: e["value"] for k, e in env.items() if "value" in e}
        for index in range(spec["replicas"]):
            tf_config = json.dumps({"cluster": cluster, "task": {"type": name.lower(), "index": index}})
            plans[(name, index)] = cluster_managers.detect(dict(process_env, TF_CONFIG=tf_config,
                                                                DMLC_NODE_HOST="10.0.0.9", BYTEPS_JOB_SECRET="s" * 16))
    assert len(elastic) == 1  # every pod the same limits
    assert replicas["Worker"]["restartPolicy"] in ("OnFailure", "ExitCode")
    assert replicas["Chief"]["restartPolicy"] == replicas["PS"]["restartPolicy"] == "OnFailure"
    chief_command = replicas["Chief"]["template"]["spec"]["containers"][0]["command"]
    assert chief_command[:3] == ["bpslaunch", "--max-restarts", "3"]
    workers = [plan for (name, _), plan in plans.items() if name == "Worker"]
    assert all(plan.servers == 0 and not plan.scheduler and plan.local_size == 1 for plan in workers)
    assert plans[("Chief", 0)].scheduler and plans[("Chief", 0)].servers == 0
    assert sum(plan.servers for plan in plans.values()) == int(plans[("Chief", 0)].job["DMLC_NUM_SERVER"]) == 2
    (min_workers, max_workers), = elastic
    assert int(max_workers) == 1 + len(workers) and 1 <= int(min_workers) <= len(workers)  # chief and workers
