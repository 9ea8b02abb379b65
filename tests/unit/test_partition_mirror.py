"""bps_tf.plan's mirror of the scheduler's partition planner (bps_tf/plan/partitions.py) against the planner
itself (cc/ps/partition_planner.cc, through bps_tf._core): the same bytes, pieces and groups per server."""

import random

import pytest

from bps_tf.plan import partitions

_core = pytest.importorskip("bps_tf._core")


def _planner(servers, partition_bytes, slice_bytes, elements, min_spread=partitions.MIN_SPREAD_BYTES):
    """(bytes per server, slices per server, pushes per server with a group's small tensors as one)."""
    loads, units, messages = [0] * servers, [0] * servers, [0] * servers
    group_limit = partitions.group_bytes(partition_bytes, min_spread)
    group_server, group_used = None, 0
    plans = _core.plan_partitions(servers, partition_bytes, slice_bytes or 0, elements, min_spread)
    for count, plan in zip(elements, plans):
        pieces = {}
        for server, n in plan:
            loads[server] += 4 * n
            units[server] += 1
            pieces.setdefault(server, 0)
            pieces[server] += 1
        small = len(pieces) == 1 and 4 * count < group_limit and 4 * count <= partition_bytes
        if not small:
            for server, n in pieces.items():
                messages[server] += n
            continue
        (server,) = pieces
        if server != group_server or group_used + 4 * count > group_limit:
            messages[server] += 1  # the tensor opens a group
            group_server, group_used = server, 0
        group_used += 4 * count
    return tuple(loads), tuple(units), tuple(messages)


CASES = [
    # (servers, partition bytes, slice bytes or None, element counts)
    (4, 4096000, None, [1024] * 200),
    (2, 8192, None, [1024, 1024, 1024, 1024, 3000, 7, 1, 2048]),
    (8, 4096000, 256000, [1, 7, 1024, 65536, 262144, 1000000, 3, 25000000, 77, 4096]),
]


@pytest.mark.parametrize("servers,partition_bytes,slice_bytes,elements", CASES)
def test_mirror_matches_planner(servers, partition_bytes, slice_bytes, elements):
    mirror = partitions.plan([4 * n for n in elements], servers, partition_bytes, slice_bytes)
    loads, units, messages = _planner(servers, partition_bytes, slice_bytes, elements)
    assert mirror.server_bytes == loads
    assert mirror.server_units == units
    assert mirror.server_messages == messages


def test_mirror_matches_planner_on_a_random_model():
    rng = random.Random(7)
    for servers in (1, 3, 16):
        elements = [rng.choice([1, rng.randint(1, 4096), rng.randint(1, 70000), rng.randint(1, 3000000)])
                    for _ in range(300)]
        mirror = partitions.plan([4 * n for n in elements], servers, 4096000, 256000)
        loads, units, messages = _planner(servers, 4096000, 256000, elements)
        assert (mirror.server_bytes, mirror.server_units, mirror.server_messages) == (loads, units, messages)


@pytest.mark.parametrize("min_spread", [65536, 1048576, 4194304])
def test_mirror_matches_planner_with_another_min_spread(min_spread):
    """BYTEPS_MIN_SPREAD_BYTES: pieces of a spread tensor and groups of small ones follow it in both."""
    rng = random.Random(11)
    elements = [rng.choice([1, rng.randint(1, 4096), rng.randint(1, 300000), rng.randint(1, 3000000)])
                for _ in range(200)]
    for servers, slice_bytes in ((16, None), (8, 256000)):
        mirror = partitions.plan([4 * n for n in elements], servers, 2048000, slice_bytes, min_spread)
        loads, units, messages = _planner(servers, 2048000, slice_bytes, elements, min_spread)
        assert (mirror.server_bytes, mirror.server_units, mirror.server_messages) == (loads, units, messages)
    spread = partitions.plan([4 * n for n in elements], 16, 2048000, None, min_spread)
    default = partitions.plan([4 * n for n in elements], 16, 2048000)
    # larger pieces, fewer messages (the setting's purpose); smaller, more
    assert (spread.messages < default.messages) == (min_spread > partitions.MIN_SPREAD_BYTES)


def test_groups_cut_the_pushes_of_many_small_tensors():
    plan = partitions.plan([4096] * 640, 4, 4096000)  # 2.5 MB of 4 KB tensors: ten full groups
    assert plan.units == 640
    assert plan.messages == 10
