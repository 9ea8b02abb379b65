"""The step model's TCP socket stages (bps_tf/plan/step_model.py): the kernel's CPU per byte at a server and at
each worker process, on the busiest of its I/O threads, against figures worked out by hand; none over RDMA.

The case: 4 worker machines of 1 GPU, 1 server, 100 Gbit/s links, one 64 MiB gradient (67,108,864 bytes).
Over TCP it crosses in 263 slices (16 partitions of 4,096,000 bytes in 16 slices each, and the last 1,572,864
bytes in 7). With the constants these figures were worked out with (PARAMS: goodput 0.958, duplex 0.993, 16.5 us
a message end; the measured ones move as they are measured again), a byte costs 0.19 ns at both ends together,
0.095 ns at each:
- server sockets: 4 machines x 67,108,864 bytes in and as many out x 0.095 ns = 51.00 ms of CPU, on 1 I/O thread
  all of it; the 4 worker connections on 2 or 3 threads put 2 on the busiest (25.50 ms), on 4 or more 1 (12.75 ms);
- worker sockets: 67,108,864 bytes each way x 0.095 ns = 12.75 ms, one connection (one server);
- the stages it competes with: server link 4 x 67,108,864 / (12.5e9 x 0.958 x 0.993) = 22.57 ms, server sum
  3 x 67,108,864 / (2 x 5.2e9) = 19.36 ms, server messages 2 x 4 x 263 x 16.5 us = 34.72 ms;
- beyond the slowest stage: one round of slices through the server link, 4 x 256,000 / 11.891e9 = 0.086 ms,
  a call's round trip, 2 x 5 us + 4 x 16.5 us = 0.076 ms, and the first partition's trip through the
  worker's host path, 4,096,000 / 28e9 = 0.146 ms.
"""

import pytest

from bps_tf.plan import MEASURED, Cluster, rate_bytes_per_s
from bps_tf.plan.cli import parse_args, plan_from
from bps_tf.plan.step_model import network_stages, plan_for, push_pull_time

GRADIENTS = [64 << 20]
PARAMS = MEASURED.replace(goodput_fraction=0.958, duplex_fraction=0.993, message_s=16.5e-6, tcp_cpu_s_per_byte=0.19e-9,
                          io_threads=4, sum_bytes_per_s=5.2e9, sum_threads=2, latency_s=5e-6, slice_bytes=256000,
                          partition_bytes=4096000)
BEYOND_SLOWEST_S = 4 * 256000 / (12.5e9 * 0.958 * 0.993) + 2 * 5e-6 + 4 * 16.5e-6 + 4096000 / 28e9


def cluster(transport="tcp", **changes):
    return Cluster(machines=4, servers=1, link_bytes_per_s=rate_bytes_per_s("100gbit"), transport=transport,
                   **changes)


def stages(io_threads, transport="tcp", **changes):
    params = PARAMS.replace(io_threads=io_threads)
    where = cluster(transport, **changes)
    return network_stages(where, plan_for(where, GRADIENTS, params), params)


def test_one_io_thread_bounds_a_tcp_server_at_100_gbit():
    measured = stages(1)
    assert measured["server sockets"] == pytest.approx(0.051003, rel=1e-4)
    assert measured["worker sockets"] == pytest.approx(0.012751, rel=1e-4)
    assert measured["server link"] == pytest.approx(0.022574, rel=1e-4)
    assert measured["server messages"] == pytest.approx(0.034716, rel=1e-4)
    seconds, bound = push_pull_time(cluster(), GRADIENTS, PARAMS.replace(io_threads=1))
    assert bound == "server sockets"
    assert seconds == pytest.approx(0.051003 + BEYOND_SLOWEST_S, rel=1e-4)


@pytest.mark.parametrize("io_threads, server_s", [(2, 0.025501), (3, 0.025501), (4, 0.012751), (8, 0.012751)])
def test_more_io_threads_lower_the_server_sockets_down_to_one_connection_each(io_threads, server_s):
    measured = stages(io_threads)
    assert measured["server sockets"] == pytest.approx(server_s, rel=1e-4)
    assert measured["worker sockets"] == pytest.approx(0.012751, rel=1e-4)  # one server: one connection


def test_four_io_threads_leave_the_server_bound_by_its_messages():
    seconds, bound = push_pull_time(cluster(), GRADIENTS, PARAMS)  # the default, 4 threads
    assert bound == "server messages"
    assert seconds == pytest.approx(0.034716 + BEYOND_SLOWEST_S, rel=1e-4)


def test_rdma_and_the_emulated_cluster_have_no_socket_stages():
    assert "server sockets" not in stages(1, "rdma") and "worker sockets" not in stages(1, "rdma")
    costly = PARAMS.replace(io_threads=1, tcp_cpu_s_per_byte=1e-6)
    assert push_pull_time(cluster("rdma"), GRADIENTS, costly) == push_pull_time(cluster("rdma"), GRADIENTS, PARAMS)
    # the emulated cluster's shared cores already count every host's socket bytes (cores_time)
    assert "server sockets" not in stages(1, shared_cores=2, machine_bytes_per_s=1e9)


def test_the_planner_takes_the_io_threads():
    # 100 MB in 24 tensors to 1 server from 4 machines: 4 x 1e8 x 0.19 ns = 76 ms of server sockets on 1 thread,
    # 19 ms on 4; with the measured parameters the server link (4e8 bytes at 100 Gbit/s) or the messages bound then.
    argv = ["--machines", "4", "--link", "100gbit", "--transport", "tcp", "--gradient-bytes", "100e6", "--servers", "1"]
    one = plan_from(parse_args(argv + ["--io-threads", "1"]))["servers"][0]
    four = plan_from(parse_args(argv))["servers"][0]
    assert one["bound"] == "server sockets" and one["seconds"] == pytest.approx(0.076, rel=0.01)
    assert four["bound"] != "server sockets" and four["seconds"] < one["seconds"]
    with pytest.raises(SystemExit, match="io-threads"):
        plan_from(parse_args(argv + ["--io-threads", "0"]))
