"""bpslaunch started as cluster managers start it, each "node" a bpslaunch process on this host with the
environment that manager gives: SLURM (srun, one task per node) and Kubeflow's TFJob (TF_CONFIG). The
examples for both (examples/slurm, examples/kubernetes) are checked against the same mapping."""

import json
import re
import secrets
import subprocess

import pytest
import yaml

from testing.jobs import BPSLAUNCH, REPO_ROOT, WORKERS_DIR, clean_env, free_port
from bps_tf.launcher import cluster_managers


def run_nodes(envs, command, timeout=200):
    """Starts one bpslaunch per environment, all at once; returns [(exit code, output)]."""
    processes = [subprocess.Popen([BPSLAUNCH, *command], env=clean_env(**env), stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) for env in envs]
    results = []
    for process in processes:
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for other in processes:
                other.kill()
            raise
        results.append((process.returncode, output))
    return results


SUMS = [str(REPO_ROOT / ".venv" / "bin" / "python"), str(WORKERS_DIR / "sums.py")]


@pytest.mark.timeout(300)
def test_slurm_two_nodes_of_two_processes():
    secret = secrets.token_hex(16)
    envs = [dict(SLURM_PROCID=node, SLURM_NODEID=node, SLURM_NTASKS=2, SLURM_NNODES=2, SLURM_JOB_ID=31337,
                 SLURM_JOB_NODELIST="localhost,127.0.0.1", SLURM_GPUS_ON_NODE=2, DMLC_PS_ROOT_PORT=free_port(),
                 BYTEPS_JOB_SECRET=secret) for node in range(2)]
    envs[1]["DMLC_PS_ROOT_PORT"] = envs[0]["DMLC_PS_ROOT_PORT"]
    results = run_nodes(envs, SUMS)
    for node, (code, output) in enumerate(results):
        assert code == 0, output[-4000:]
        for local_rank in range(2):
            rank = node * 2 + local_rank
            assert f"[worker {node}.{local_rank}] rank {rank}: 42 dtype/size cases exact" in output, output[-4000:]
    assert "this machine runs scheduler, 1 server(s), worker machine 0 (2 process(es))" in results[0][1]
    assert "this machine runs 1 server(s), worker machine 1 (2 process(es))" in results[1][1]


def _tf_config(cluster, task_type, index):
    return json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}})


@pytest.mark.timeout(300)
def test_tf_config_chief_worker_and_two_ps_train_keras_to_the_same_model():
    cluster = {"chief": [f"localhost:{free_port()}"], "worker": ["127.0.0.1:2222"],
               "ps": ["localhost:2223", "127.0.0.1:2224"]}
    secret = secrets.token_hex(16)
    tasks = [("chief", 0), ("worker", 0), ("ps", 0), ("ps", 1)]
    envs = [dict(TF_CONFIG=_tf_config(cluster, t, i), BYTEPS_JOB_SECRET=secret) for t, i in tasks]
    example = [str(REPO_ROOT / ".venv" / "bin" / "python"), str(REPO_ROOT / "examples" / "keras_digits.py")]
    results = run_nodes(envs, example)
    assert all(code == 0 for code, _ in results), [output[-3000:] for _, output in results]
    reports = [re.findall(r"worker (\d): test accuracy ([0-9.]+), model fingerprint (\w+)", output)
               for _, output in results[:2]]
    assert [r[0][0] for r in reports] == ["0", "1"], reports
    assert reports[0][0][2] == reports[1][0][2] and float(reports[0][0][1]) > 0.9, reports
    assert all("this machine runs 1 server(s)" in output for _, output in results[2:])


def _operator_tf_config(job, replica_types, task_type, index):
    """TF_CONFIG as Kubeflow's training operator writes it: one service per replica, on its tfjob-port."""
    cluster = {}
    for name, spec in replica_types.items():
        port = next(p["containerPort"] for p in spec["template"]["spec"]["containers"][0]["ports"]
                    if p["name"] == "tfjob-port")
        cluster[name.lower()] = [f"{job}-{name.lower()}-{i}.default.svc:{port}" for i in range(spec["replicas"])]
    return _tf_config(cluster, task_type, index)


def test_the_tfjob_manifest_gives_gpu_workers_and_cpu_servers_one_scheduler():
    manifest = yaml.safe_load((REPO_ROOT / "examples" / "kubernetes" / "tfjob.yaml").read_text())
    assert manifest["kind"] == "TFJob"
    replicas = manifest["spec"]["tfReplicaSpecs"]
    plans = {}
    for name, spec in replicas.items():
        container = spec["template"]["spec"]["containers"][0]
        assert container["name"] == "tensorflow" and container["command"][0] == "bpslaunch"
        env = {e["name"]: e for e in container.get("env", [])}
        assert env["BYTEPS_JOB_SECRET"]["valueFrom"]["secretKeyRef"]["name"] == "bps-tf-job-secret"
        process_env = {k: e["value"] for k, e in env.items() if "value" in e}
        for index in range(spec["replicas"]):
            tf_config = _operator_tf_config(manifest["metadata"]["name"], replicas, name.lower(), index)
            plans[(name, index)] = cluster_managers.detect(dict(process_env, TF_CONFIG=tf_config,
                                                                BYTEPS_JOB_SECRET="s" * 16))
        gpus = container.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
        if name == "PS":
            assert gpus is None and len(container["command"]) == 1  # servers only: no training command
        else:
            assert int(process_env["BYTEPS_LOCAL_SIZE"]) == gpus and len(container["command"]) > 1
    assert [key for key, plan in plans.items() if plan.scheduler] == [("Chief", 0)]
    assert sorted(plan.worker_id for plan in plans.values() if plan.worker_id is not None) == [0, 1, 2, 3]
    assert sum(plan.servers for plan in plans.values()) == int(plans[("Chief", 0)].job["DMLC_NUM_SERVER"]) == 2


def test_the_sbatch_example_runs_one_bpslaunch_per_node_with_a_secret():
    script = (REPO_ROOT / "examples" / "slurm" / "bps_tf.sbatch").read_text()
    options = dict(re.findall(r"^#SBATCH --([\w-]+)=(\S+)", script, re.MULTILINE))
    assert options["ntasks-per-node"] == "1" and int(options["nodes"]) > 1
    lines = [line for line in script.splitlines() if line and not line.startswith("#")]
    assert lines[-1].startswith("srun bpslaunch ")
    assert any(line.startswith("export BYTEPS_JOB_SECRET=") for line in lines[:-1])
    nodes = int(options["nodes"])
    plans = [cluster_managers.detect(dict(SLURM_PROCID=str(n), SLURM_NODEID=str(n), SLURM_NTASKS=str(nodes),
                                 SLURM_JOB_NODELIST=f"node[1-{nodes}]", SLURM_GPUS_ON_NODE=options["gpus-per-node"],
                                 BYTEPS_JOB_SECRET="s" * 16)) for n in range(nodes)]
    assert [plan.scheduler for plan in plans] == [True] + [False] * (nodes - 1)
    assert all(plan.local_size == int(options["gpus-per-node"]) and plan.servers == 1 for plan in plans)
