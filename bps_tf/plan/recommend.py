"""How many servers and what partition size: the fewest servers within 5% of the best the model finds, and
the partition size that makes the step's communication shortest with them (larger on ties: fewer messages)."""

from bps_tf.plan.step_model import push_pull_time

PARTITION_SIZES = (256000, 512000, 1024000, 2048000, 4096000, 8192000, 16384000)
WITHIN = 1.05


def servers_table(cluster, tensor_bytes, params, most=None, element_bytes=4):
    """[(servers, seconds, bound)] for 1 .. `most` servers (default: twice the machines)."""
    most = most or 2 * cluster.machines
    counts = sorted({s for s in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if s <= most} | {cluster.machines, most})
    return [(s, *push_pull_time(cluster.with_servers(s), tensor_bytes, params, element_bytes)) for s in counts]


def recommend(cluster, tensor_bytes, params, most=None, element_bytes=4):
    """(servers, partition bytes, seconds) for this cluster and these gradients."""
    table = servers_table(cluster, tensor_bytes, params, most, element_bytes)
    best = min(seconds for _, seconds, _ in table)
    servers = next(s for s, seconds, _ in table if seconds <= WITHIN * best)
    timed = [(push_pull_time(cluster.with_servers(servers), tensor_bytes, params.replace(partition_bytes=p),
                             element_bytes)[0], -p) for p in PARTITION_SIZES]
    seconds, minus_partition = min(timed)
    return servers, -minus_partition, seconds
