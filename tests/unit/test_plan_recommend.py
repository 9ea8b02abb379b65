"""The planner's recommendation (bps_tf/plan/recommend.py, python -m bps_tf.plan): servers, partition size and
min spread (BYTEPS_PARTITION_BYTES, BYTEPS_MIN_SPREAD_BYTES), and the command line's options for them."""

import pytest

from bps_tf.plan import MEASURED, Cluster, rate_bytes_per_s, workloads
from bps_tf.plan.cli import parse_args, plan_from, report
from bps_tf.plan.recommend import MIN_SPREAD_SIZES, PARTITION_SIZES, best_partitioning, recommend, spreads_for
from bps_tf.plan.step_model import push_pull_time

BERT = workloads.gradient_bytes("bert-large")
CLUSTER = Cluster(machines=32, servers=32, gpus_per_machine=8, link_bytes_per_s=rate_bytes_per_s("100gbit"))
DEAR_MESSAGES = MEASURED.replace(message_s=16.5e-6)  # where a server's messages bound the step


@pytest.mark.parametrize("params", [MEASURED, DEAR_MESSAGES], ids=["measured", "dear-messages"])
def test_the_best_partitioning_is_the_fastest_of_every_partition_and_spread(params):
    partition, spread, seconds, _ = best_partitioning(CLUSTER, BERT, params, element_bytes=2)
    timed = [push_pull_time(CLUSTER, BERT, params.replace(partition_bytes=p, min_spread_bytes=m), 2)[0]
             for p in PARTITION_SIZES for m in spreads_for(p)]
    # and no spread of the full grid does better: those above a partition plan as the partition itself
    assert seconds <= min(push_pull_time(CLUSTER, BERT, params.replace(partition_bytes=p, min_spread_bytes=m), 2)[0]
                          for p in PARTITION_SIZES for m in MIN_SPREAD_SIZES)
    assert seconds == min(timed)
    assert seconds == push_pull_time(CLUSTER, BERT, params.replace(partition_bytes=partition,
                                                                   min_spread_bytes=spread), 2)[0]


def test_where_messages_bound_larger_pieces_than_the_default_shorten_the_step():
    # BERT-large on 32 x 8 GPUs at 100 Gbit/s with messages of 16.5 us is bound by the servers' messages
    partition, spread, seconds, bound = best_partitioning(CLUSTER, BERT, DEAR_MESSAGES, element_bytes=2)
    assert spread > DEAR_MESSAGES.min_spread_bytes
    default = push_pull_time(CLUSTER, BERT, DEAR_MESSAGES.replace(partition_bytes=partition), 2)
    assert default[1] == "server messages" and seconds < default[0]


def test_on_ties_the_largest_partition_and_spread():
    one_machine = Cluster(machines=1, gpus_per_machine=8, link_bytes_per_s=rate_bytes_per_s("100gbit"))
    # one machine skips the servers: every partition and spread takes the same time (a spread as large as the
    # partition: whole partitions)
    assert best_partitioning(one_machine, BERT, MEASURED, 2)[:2] == (max(PARTITION_SIZES), max(PARTITION_SIZES))
    servers, partition, spread, _ = recommend(one_machine, BERT, MEASURED, element_bytes=2)
    assert (servers, partition, spread) == (1, max(PARTITION_SIZES), max(PARTITION_SIZES))


def test_the_command_line_recommends_and_takes_a_min_spread():
    argv = ["--machines", "32", "--gpus-per-machine", "8", "--link", "100gbit", "--model", "bert-large"]
    result = plan_from(parse_args(argv))
    rec = result["recommended"]
    assert rec["partition_bytes"] in PARTITION_SIZES and rec["min_spread_bytes"] in spreads_for(rec["partition_bytes"])
    assert (f"BYTEPS_PARTITION_BYTES={rec['partition_bytes']} BYTEPS_MIN_SPREAD_BYTES={rec['min_spread_bytes']} "
            in report(result))
    rows = argv + ["--servers", "32", "--partition-bytes", "1024000"]
    default = plan_from(parse_args(rows))["servers"][0]["seconds"]
    wider = plan_from(parse_args(rows + ["--min-spread-bytes", "524288"]))["servers"][0]["seconds"]
    assert wider == pytest.approx(push_pull_time(CLUSTER, BERT, MEASURED.replace(
        partition_bytes=1024000, min_spread_bytes=524288), 2)[0])
    assert wider != default
    with pytest.raises(SystemExit, match="min-spread-bytes"):
        plan_from(parse_args(rows + ["--min-spread-bytes", "0"]))
