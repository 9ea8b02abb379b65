"""bpslaunch's reading of cluster managers' environments (bps_tf/launcher/cluster_managers.py): SLURM's host lists
and tasks, Kubeflow's TF_CONFIG, and the processes each machine then runs (node_job.node_launches)."""

import json

import pytest

from bps_tf.launcher import cluster_managers
from bps_tf.launcher.node_job import node_launches

SECRET = {"BYTEPS_JOB_SECRET": "0123456789abcdef0123"}


@pytest.mark.parametrize("hostlist, hosts", [
    ("solo", ["solo"]),
    ("gpu[01-03,07]", ["gpu01", "gpu02", "gpu03", "gpu07"]),
    ("a[1-2],b,c[9-10]x", ["a1", "a2", "b", "c9x", "c10x"]),
    ("rack[1-2]-n[08-09]", ["rack1-n08", "rack1-n09", "rack2-n08", "rack2-n09"]),
])
def test_slurm_host_lists_expand_in_order(hostlist, hosts):
    assert cluster_managers.expand_hostlist(hostlist) == hosts


@pytest.mark.parametrize("hostlist", ["gpu[01-03", "gpu01-03]", "gpu[3-1]", "gpu[a-b]"])
def test_a_host_list_that_cannot_be_read_is_an_error(hostlist):
    with pytest.raises(cluster_managers.ClusterManagerError, match="host list|range"):
        cluster_managers.expand_hostlist(hostlist)


def slurm(node, nodes="gpu[01-03]", tasks=3, **extra):
    return dict(SECRET, SLURM_PROCID=str(node), SLURM_NODEID=str(node), SLURM_NTASKS=str(tasks),
                SLURM_JOB_NODELIST=nodes, SLURM_JOB_ID="777", **extra)


def test_slurm_node_0_runs_the_scheduler_and_every_node_a_server_and_its_workers():
    first = cluster_managers.detect(slurm(0, SLURM_GPUS_ON_NODE="4"))
    second = cluster_managers.detect(slurm(1, SLURM_GPUS_ON_NODE="4"))
    assert (first.scheduler, first.servers, first.worker_id, first.local_size) == (True, 1, 0, 4)
    assert (second.scheduler, second.servers, second.worker_id, second.local_size) == (False, 1, 1, 4)
    assert first.job["DMLC_PS_ROOT_URI"] == second.job["DMLC_PS_ROOT_URI"] == "gpu01"
    assert first.job["DMLC_PS_ROOT_PORT"] == second.job["DMLC_PS_ROOT_PORT"]  # the same on every node
    assert (first.job["DMLC_NODE_HOST"], second.job["DMLC_NODE_HOST"]) == ("gpu01", "gpu02")
    assert (first.job["DMLC_NUM_WORKER"], first.job["DMLC_NUM_SERVER"]) == ("3", "3")


def test_slurm_settings_the_user_gives_win():
    plan = cluster_managers.detect(slurm(2, BYTEPS_SERVERS_PER_NODE="2", BYTEPS_LOCAL_SIZE="8",
                                         DMLC_PS_ROOT_PORT="9000", SLURM_GPUS_ON_NODE="4"))
    assert (plan.servers, plan.local_size, plan.job["DMLC_NUM_SERVER"]) == (2, 8, "6")
    assert plan.job["DMLC_PS_ROOT_PORT"] == "9000"


@pytest.mark.parametrize("env, message", [
    (slurm(0, tasks=6), "--ntasks-per-node=1"),
    ({k: v for k, v in slurm(0).items() if k != "BYTEPS_JOB_SECRET"}, "BYTEPS_JOB_SECRET"),
    (slurm(0, BYTEPS_SERVERS_PER_NODE="0"), "positive integer"),
    (slurm(5), "not a node"),
])
def test_slurm_mistakes_say_what_to_change(env, message):
    with pytest.raises(cluster_managers.ClusterManagerError, match=message):
        cluster_managers.detect(env)


def tf_config(task_type, index, ps=2, chief=True, workers=2):
    cluster = {"worker": [f"job-worker-{i}.ns.svc:2222" for i in range(workers)]}
    if chief:
        cluster["chief"] = ["job-chief-0.ns.svc:2222"]
    if ps:
        cluster["ps"] = [f"job-ps-{i}.ns.svc:2222" for i in range(ps)]
    return dict(SECRET, TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": task_type, "index": index}}))


def test_tf_config_chief_is_worker_0_beside_the_scheduler_and_ps_tasks_are_servers():
    chief = cluster_managers.detect(tf_config("chief", 0))
    worker = cluster_managers.detect(tf_config("worker", 1))
    ps = cluster_managers.detect(tf_config("ps", 1))
    assert (chief.scheduler, chief.worker_id, chief.servers) == (True, 0, 0)
    assert (worker.scheduler, worker.worker_id, worker.servers) == (False, 2, 0)
    assert (ps.scheduler, ps.worker_id, ps.servers) == (False, None, 1)
    for plan in (chief, worker, ps):
        assert plan.job["DMLC_PS_ROOT_URI"] == "job-chief-0.ns.svc" and plan.job["DMLC_PS_ROOT_PORT"] == "2222"
        assert (plan.job["DMLC_NUM_WORKER"], plan.job["DMLC_NUM_SERVER"]) == ("3", "2")
    assert ps.job["DMLC_NODE_HOST"] == "job-ps-1.ns.svc"


def test_tf_config_without_ps_puts_a_server_beside_each_worker_and_without_chief_worker_0_leads():
    first = cluster_managers.detect(tf_config("worker", 0, ps=0, chief=False))
    second = cluster_managers.detect(tf_config("worker", 1, ps=0, chief=False))
    assert (first.scheduler, first.worker_id, first.servers) == (True, 0, 1)
    assert (second.scheduler, second.worker_id, second.servers) == (False, 1, 1)
    assert first.job["DMLC_NUM_SERVER"] == "2" and first.job["DMLC_PS_ROOT_URI"] == "job-worker-0.ns.svc"


@pytest.mark.parametrize("env, message", [
    (dict(SECRET, TF_CONFIG="{not json"), "not a TensorFlow cluster description"),
    (tf_config("evaluator", 0), "evaluator"),
    (tf_config("worker", 7), "not in the cluster"),
    ({"TF_CONFIG": tf_config("chief", 0)["TF_CONFIG"]}, "Secret"),
])
def test_tf_config_mistakes_say_what_to_change(env, message):
    with pytest.raises(cluster_managers.ClusterManagerError, match=message):
        cluster_managers.detect(env)


def test_roles_chosen_by_hand_win_and_no_cluster_manager_means_no_plan():
    assert cluster_managers.detect(dict(slurm(0), DMLC_ROLE="worker")) is None
    assert cluster_managers.detect(dict(tf_config("chief", 0), DMLC_ROLE="server")) is None
    assert cluster_managers.detect({"HOME": "/root"}) is None


def test_a_node_runs_exactly_the_processes_of_its_plan():
    plan = cluster_managers.detect(slurm(0, BYTEPS_LOCAL_SIZE="2"))
    launches = node_launches(plan, ["python", "train.py"], base={"DMLC_WORKER_ID": "9", "PATH": "/bin"})
    assert [launch.label for launch in launches] == ["scheduler", "server 0", "worker 0.0", "worker 0.1"]
    roles = [launch.env["DMLC_ROLE"] for launch in launches]
    assert roles == ["scheduler", "server", "worker", "worker"]
    assert [launch.env.get("BYTEPS_LOCAL_RANK") for launch in launches[2:]] == ["0", "1"]
    assert all(launch.env["DMLC_WORKER_ID"] == "0" for launch in launches[2:])
    assert "DMLC_WORKER_ID" not in launches[0].env  # a stale id never reaches the scheduler
    assert launches[2].argv == ["python", "train.py"]
