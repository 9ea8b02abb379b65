"""The step model on machines of several GPUs (bps_tf/plan/step_model.py): a tensor of g x 256 KiB or more is
reduce-scattered and pushed as g slices, one by each GPU's process; a smaller one is reduced to GPU 0 and pushed
whole by its process (GpuPushPull, cc/cuda/gpu_push_pull.cc). Figures worked out by hand."""

import pytest

from bps_tf.plan import MEASURED, Cluster, rate_bytes_per_s
from bps_tf.plan.partitions import plan
from bps_tf.plan.step_model import WHOLE_BELOW_BYTES_PER_GPU, local_stages, network_stages, plan_for

KIB = 1024


def machines(gpus, servers=4):
    return Cluster(machines=4, servers=servers, gpus_per_machine=gpus, link_bytes_per_s=rate_bytes_per_s("100gbit"))


def test_a_tensor_under_g_times_256_kib_is_one_piece_of_gpu_0_and_a_larger_one_g_slices():
    assert WHOLE_BELOW_BYTES_PER_GPU == 256 * KIB
    under, at = 8 * 256 * KIB - 2, 8 * 256 * KIB
    whole = plan_for(machines(8), [under], MEASURED, element_bytes=2)  # one tensor, spread in 4 pieces of 512 KiB
    assert whole.tensors == 1 and whole.owner_bytes == (under,) and whole.owner_messages == (4,)
    sliced = plan_for(machines(8), [at], MEASURED, element_bytes=2)  # each slice in 4 pieces of 64 KiB
    assert sliced.tensors == 8 and sliced.owner_bytes == (256 * KIB,) * 8 and sliced.owner_messages == (4,) * 8
    both = plan_for(machines(8), [under, at], MEASURED, element_bytes=2)
    assert both.owner_bytes == (under + 256 * KIB,) + (256 * KIB,) * 7


def test_one_gpu_pushes_every_tensor_whole_as_before():
    tensors = [4 * KIB, 300 * KIB, 5 << 20]
    assert plan_for(machines(1), tensors, MEASURED) == plan(tensors, 4, MEASURED.partition_bytes)
    assert local_stages(machines(1), tensors, MEASURED) == {"worker host path": pytest.approx(sum(tensors) / 28.0e9)}


def test_every_byte_a_gpu_machine_pushes_goes_through_its_host_at_the_measured_rate():
    tensors = [4 * KIB, 300 * KIB, 5 << 20]  # 5,554,176 bytes through the host at 2 x 14.0 GB/s: 198.4 us
    for gpus in (1, 8):
        assert local_stages(machines(gpus), tensors, MEASURED)["worker host path"] == pytest.approx(198.4e-6, rel=1e-3)
    emulated = Cluster(machines=4, servers=4, link_bytes_per_s=rate_bytes_per_s("1gbit"), shared_cores=2)
    assert local_stages(emulated, tensors, MEASURED) == {}, "an emulated cluster's machines push CPU tensors"


def test_gpu_0_copies_its_slices_and_every_whole_tensor():
    whole, scattered = 1 << 20, 16 << 20  # 1 MiB < 8 x 256 KiB: whole; 16 MiB: 2 MiB a GPU
    stages = local_stages(machines(8), [whole, scattered], MEASURED)
    copy = (scattered / 8 + whole) / 50.9e9  # 3 MiB: 61.8 us
    nccl = 7 / 8 * (scattered + 1.38 * whole) / 240e9  # the reduce and broadcast of 1 MiB cost 1.38 MiB's
    assert stages["copy to host"] == pytest.approx(copy) and stages["copy to GPU"] == pytest.approx(copy)
    assert stages["NCCL reduce-scatter and reduce"] == pytest.approx(nccl)
    assert stages["NCCL all-gather and broadcast"] == pytest.approx(nccl)
    assert copy == pytest.approx(61.8e-6, rel=1e-3)


def test_the_busiest_process_sends_the_worker_messages():
    # 100 biases of 4 KB on a machine of 8 GPUs: all whole, from GPU 0's process; 400 KB in groups of at most
    # 256 KiB: 2 groups, 2 pushes and 2 replies of GPU 0's process.
    cluster = machines(8)
    small = plan_for(cluster, [4000] * 100, MEASURED)
    assert small.owner_messages == (2,) and small.messages == 2
    assert network_stages(cluster, small, MEASURED)["worker messages"] == pytest.approx(2 * 2 * MEASURED.message_s)


def test_a_process_fuses_its_members_of_a_group_in_one_message():
    # 16 tensors of 60,000 bytes, from processes 0 and 1 in turn, on one server. Groups of 256 KiB hold 4
    # (240,000 bytes, 2 of each process): 4 groups, 8 pushes. Groups of 1 MiB (a worker's fused messages
    # follow the group's size) hold all 16: one push of each process.
    tensors, owners = [60000] * 16, [0, 1] * 8
    assert plan(tensors, 1, 4096000, owners=owners).server_messages == (8,)
    wide = plan(tensors, 1, 4096000, min_spread_bytes=1 << 20, owners=owners)
    assert wide.server_messages == (2,) and wide.owner_messages == (1, 1)
    # two grouped tensors of 300,000 bytes and a small one: one group, one message
    assert plan([300000, 300000, 10000], 1, 4096000, min_spread_bytes=1 << 20).server_messages == (1,)
    # over TCP a grouped tensor crosses in slices (600,000 bytes: 256,000, 256,000 and 88,000), fused as one
    assert plan([600000], 1, 4096000, 256000, min_spread_bytes=1 << 20).server_messages == (1,)


def test_each_gpu_part_is_planned_in_chunks_of_a_partition():
    # 64 MiB on 8 GPUs, 4,096,000-byte partitions: each GPU's 8 MiB slice in chunks of 4,096,000, 4,096,000
    # and 196,608 bytes, each a tensor of its own for the planner (GpuPushPull::PlanChunks)
    params = MEASURED.replace(partition_bytes=4096000)
    sliced = plan_for(machines(8), [64 << 20], params, element_bytes=2)
    assert sliced.tensors == 8 * 3 and sliced.owner_bytes == (8 << 20,) * 8
    assert sliced.total_bytes == 64 << 20
    # one GPU: the whole gradient as one tensor (a CPU tensor's push_pull)
    assert plan_for(machines(1), [64 << 20], params, element_bytes=2).tensors == 1
