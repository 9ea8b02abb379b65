"""How many servers, what partition size and what smallest spread piece: the fewest servers within 5% of the
best the model finds, and the partition size and min spread (BYTEPS_PARTITION_BYTES, BYTEPS_MIN_SPREAD_BYTES)
that make the step's communication shortest with them (the larger on ties: fewer messages)."""

from bps_tf.plan.step_model import push_pull_time

PARTITION_SIZES = (256000, 512000, 1024000, 2048000, 4096000, 8192000, 16384000)
MIN_SPREAD_SIZES = (65536, 131072, 262144, 524288, 1048576, 2097152)
WITHIN = 1.05


def servers_table(cluster, tensor_bytes, params, most=None, element_bytes=4):
    """[(servers, seconds, bound)] for 1 .. `most` servers (default: twice the machines)."""
    most = most or 2 * cluster.machines
    counts = sorted({s for s in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512) if s <= most} | {cluster.machines, most})
    return [(s, *push_pull_time(cluster.with_servers(s), tensor_bytes, params, element_bytes)) for s in counts]


def spreads_for(partition):
    """The min spreads worth trying with this partition size: pieces are at most a partition, so every spread
    from the partition up plans alike, and the partition itself stands for them all."""
    return sorted({s for s in MIN_SPREAD_SIZES if s < partition} | {partition})


def best_partitioning(cluster, tensor_bytes, params, element_bytes=4):
    """(partition bytes, min spread bytes, seconds, bound) that make this cluster's step shortest, with its
    servers as they are."""
    timed = []
    for partition in PARTITION_SIZES:
        for spread in spreads_for(partition):
            changed = params.replace(partition_bytes=partition, min_spread_bytes=spread)
            seconds, bound = push_pull_time(cluster, tensor_bytes, changed, element_bytes)
            timed.append((seconds, -partition, -spread, bound))
    seconds, minus_partition, minus_spread, bound = min(timed)
    return -minus_partition, -minus_spread, seconds, bound


def recommend(cluster, tensor_bytes, params, most=None, element_bytes=4):
    """(servers, partition bytes, min spread bytes, seconds) for this cluster and these gradients."""
    table = servers_table(cluster, tensor_bytes, params, most, element_bytes)
    best = min(seconds for _, seconds, _ in table)
    servers = next(s for s, seconds, _ in table if seconds <= WITHIN * best)
    partition, spread, seconds, _ = best_partitioning(cluster.with_servers(servers), tensor_bytes, params,
                                                      element_bytes)
    return servers, partition, spread, seconds
