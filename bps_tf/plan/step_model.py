"""The time of one synchronous step's communication under bps_tf and under a ring all-reduce, and the step.

bps_tf, between machines: every worker machine sends its gradients once and receives the sums once (M bytes
each way on its link); server s receives and returns its share L_s from each of the n machines (n L_s each
way on its link) and sums (n - 1) L_s. These stages run at once, pipelined slice by slice (partition by
partition over RDMA), so the slowest sets the pace. A server returns a slice's sum only once all n copies
of it have arrived, so the last sums arrive about one round of slices after the last push (n times the
largest slice through a server link; drain_slices rounds); each call adds a round trip. Over TCP the
kernel's work on every byte is a stage too, at each end: a process's connections are spread over its I/O
threads (one connection on one thread), so a server's sockets run on as many cores as it has threads with
worker connections on them, and each worker process's on as many as its threads with server connections;
RDMA moves the bytes without the CPU. Within a machine of g GPUs (docs/gpu.md): a tensor of g x 256 KiB
or more is NCCL reduce-scattered, each GPU's share copied to the host, pushed and pulled by that GPU's
process, copied back and NCCL all-gathered; a smaller one is NCCL-reduced to GPU 0, pushed whole by its
process and NCCL-broadcast back; each tensor's stages overlap the others'.

An emulated cluster (every host a network namespace on one machine, links limited by tc) differs in two
ways the model takes in: each link direction lets its token bucket's burst through at once after it idled
(burst_bytes, taken off each link's bytes), and the machine's cores are a resource all hosts share,
combined with the links' time as sqrt(a^2 + b^2): both stay busy throughout and each slows the other as it
nears its limit.

Ring all-reduce (Horovod with NCCL): 2(n-1)/n M over every machine's link, 2(g-1)/g M over NVLink, and
2(ng - 1) ring steps per fused buffer.
"""

import math

from bps_tf.plan.partitions import plan as partition_plan

# GpuPushPull's rule (cc/cuda/gpu_push_pull.cc, kWholeBelowBytesPerGpu): on a machine of g GPUs a tensor of
# fewer than g x this many bytes, whose slice per GPU would be smaller, is reduced to GPU 0 and pushed whole.
WHOLE_BELOW_BYTES_PER_GPU = 262144


def is_whole(nbytes, gpus):
    """Whether a machine of `gpus` GPUs pushes a tensor of nbytes whole from GPU 0 (else one slice per GPU)."""
    return gpus > 1 and nbytes < gpus * WHOLE_BELOW_BYTES_PER_GPU


def _chunks(nbytes, chunk_bytes, element_bytes):
    """A GPU push_pull's part cut into chunks of at most chunk_bytes (whole elements), each a tensor of its own
    for the planner (GpuPushPull::PlanChunks)."""
    step = max(element_bytes, chunk_bytes // element_bytes * element_bytes)
    return [min(step, nbytes - at) for at in range(0, nbytes, step)] or [nbytes]


def plan_for(cluster, tensor_bytes, params, element_bytes=4):
    """The partition plan of one step: with g GPUs a machine pushes each gradient of g x 256 KiB or more as g
    slices (one per GPU, after NCCL's reduce-scatter; each GPU's process pushes its own) and each smaller
    one whole from GPU 0's process (after an NCCL reduce to GPU 0), together the gradients once; each part
    in chunks of a partition, which the planner places as tensors of their own. With one GPU a machine
    pushes every gradient whole, as a CPU tensor is (the emulated cluster's case)."""
    g = cluster.gpus_per_machine
    if g == 1:
        sizes, owners = list(tensor_bytes), [0] * len(tensor_bytes)
    else:
        sizes, owners = [], []
        for b in tensor_bytes:
            parts = [(b, 0)] if is_whole(b, g) else [(max(element_bytes, b // g), gpu) for gpu in range(g)]
            for part, owner in parts:
                chunks = _chunks(part, params.partition_bytes, element_bytes)
                sizes += chunks
                owners += [owner] * len(chunks)
    slices = params.slice_bytes if cluster.transport == "tcp" else None
    return partition_plan(sizes, cluster.servers, params.partition_bytes, slices, params.min_spread_bytes,
                          element_bytes, owners)


def _link_seconds(nbytes, rate, cluster, params):
    """Seconds for one direction of a link to carry nbytes at rate, less what its token bucket lets through
    at once (emulated links only: the bucket refills while the direction idles between calls)."""
    return max(0.0, nbytes - cluster.burst_bytes * params.goodput_fraction) / rate


def network_stages(cluster, plan, params):
    """Seconds of each stage of the push_pulls between machines, as a dict (the slowest bounds the step)."""
    n = cluster.machines
    rate = cluster.link_bytes_per_s * params.goodput_fraction * params.duplex_fraction
    server_rate = cluster.server_link * params.goodput_fraction * params.duplex_fraction
    busiest = max(plan.server_bytes)
    if cluster.colocated:  # a machine's link also carries its server's traffic for the other machines
        links = {"worker and server link": _link_seconds(plan.total_bytes - busiest + (n - 1) * busiest, rate,
                                                         cluster, params)}
    else:
        links = {"worker link": _link_seconds(plan.total_bytes, rate, cluster, params),
                 "server link": _link_seconds(n * busiest, server_rate, cluster, params)}
    stages = dict(links)
    stages["server sum"] = (n - 1) * busiest / (params.sum_bytes_per_s * params.sum_threads)
    # A push and its reply per slice, the small tensors of a group fused into one of each per process.
    stages["server messages"] = 2 * n * max(plan.server_messages) * params.message_s
    stages["worker messages"] = 2 * max(plan.owner_messages) * params.message_s  # the busiest GPU's process
    stages.update(socket_stages(cluster, plan, params))
    return stages


def _busiest_thread_share(connections, threads):
    """The share of a process's socket bytes on its busiest I/O thread: connections go to the threads in
    turn and each stays on its thread (cc/transport/tcp_transport.cc), their bytes about equal."""
    connections = max(1, connections)
    return math.ceil(connections / threads) / connections


def socket_stages(cluster, plan, params):
    """Seconds of the kernel's TCP work on the busiest server's and on each worker process's bytes, both
    ways, on their busiest I/O thread ({} over RDMA, and on an emulated cluster, whose cores_time counts
    every host's socket bytes). tcp_cpu_s_per_byte is a byte's cost at both ends together: half at each."""
    if cluster.transport != "tcp" or cluster.shared_cores:
        return {}
    n, g = cluster.machines, cluster.gpus_per_machine
    per_end = params.tcp_cpu_s_per_byte / 2
    busiest = max(plan.server_bytes)
    remote = n - 1 if cluster.colocated else n  # colocated: a machine's processes reach its server by shared memory
    server = 2 * remote * busiest * per_end * _busiest_thread_share(remote * g, params.io_threads)
    servers = cluster.servers - 1 if cluster.colocated else cluster.servers
    remote_share = 1 - busiest / plan.total_bytes if cluster.colocated else 1.0
    sent = max(plan.owner_bytes) * remote_share  # the busiest GPU's process, each way
    worker = 2 * sent * per_end * _busiest_thread_share(servers, params.io_threads)
    return {"server sockets": server, "worker sockets": worker}


def pipeline_lag(cluster, plan, params):
    """Seconds the last sums arrive after the last push: a server returns a slice's sum only once every
    machine's copy of it has arrived, so the pulls trail the pushes by about one round of slices (the
    largest slice from each of the n machines) through a server link; drain_slices is that lag in rounds
    (one). An emulated link's burst does not shorten it: the replies before it have emptied the bucket."""
    server_rate = cluster.server_link * params.goodput_fraction * params.duplex_fraction
    return params.drain_slices * cluster.machines * plan.largest_unit / server_rate


def cores_time(cluster, plan, params):
    """An emulated cluster: the seconds of the shared cores' work (every host's bytes through its sockets
    both ways, and every message end), None on a real cluster."""
    if not cluster.shared_cores:
        return None
    return (2 * cluster.machines * plan.total_bytes / cluster.machine_bytes_per_s
            + 2 * 2 * cluster.machines * plan.messages * params.message_s / cluster.shared_cores)


def network_time(cluster, plan, params):
    """(seconds, the bounding stage) of one step's push_pulls between machines."""
    stages = network_stages(cluster, plan, params)
    bound = max(stages, key=stages.get)
    seconds = stages[bound] + pipeline_lag(cluster, plan, params)
    cores = cores_time(cluster, plan, params)
    if cores is not None:  # an emulated cluster: every host's traffic and messages on the same cores
        if cores > seconds:
            bound = "the machine's cores"
        seconds = math.hypot(seconds, cores)
    call = cluster.call_s if cluster.call_s is not None else 2 * params.latency_s + 4 * params.message_s
    return call + seconds, bound


def local_stages(cluster, tensor_bytes, params):
    """Seconds of the stages inside one GPU machine for a step's gradients (bytes per tensor): the host
    path, every byte the machine pushes through its host memory and back at the rate measured end to end
    from GPU memory (host_path_bytes_per_s); with g GPUs also NCCL and GPU 0's copies to and from the host.
    GPU 0 copies the most: its slice of each reduce-scattered tensor and every tensor pushed whole; an NCCL
    reduce and broadcast of a tensor take reduce_broadcast_factor times its reduce-scatter and all-gather.
    None on an emulated cluster, whose machines push CPU tensors."""
    if cluster.shared_cores:
        return {}
    stages = {"worker host path": sum(tensor_bytes) / params.host_path_bytes_per_s}
    g = cluster.gpus_per_machine
    if g == 1:
        return stages
    whole = sum(b for b in tensor_bytes if is_whole(b, g))
    scattered = sum(tensor_bytes) - whole
    nccl = (g - 1) / g * (scattered + params.reduce_broadcast_factor * whole) / params.nccl_bus_bytes_per_s
    copy = (scattered / g + whole) / params.copy_bytes_per_s
    stages.update({"NCCL reduce-scatter and reduce": nccl, "copy to host": copy, "copy to GPU": copy,
                   "NCCL all-gather and broadcast": nccl})
    return stages


def push_pull_time(cluster, tensor_bytes, params, element_bytes=4):
    """(seconds, bounding stage) of bps_tf's communication for one step's gradients (bytes per tensor)."""
    total = sum(tensor_bytes)
    g = cluster.gpus_per_machine
    if cluster.machines == 1:  # bps_tf skips the servers: the local NCCL reduction is the whole job
        return 2 * (g - 1) / g * total / params.nccl_bus_bytes_per_s, "NCCL all-reduce"
    plan = plan_for(cluster, tensor_bytes, params, element_bytes)
    seconds, bound = network_time(cluster, plan, params)
    local = local_stages(cluster, tensor_bytes, params)
    if local:
        slowest = max(local, key=local.get)
        if local[slowest] > seconds:
            seconds, bound = local[slowest], slowest
        # one partition's trip through the other stages before the pipeline is full
        seconds += sum(local.values()) * min(1.0, params.partition_bytes / total)
    return seconds, bound


def ring_all_reduce_time(cluster, total_bytes, params):
    """(seconds, bound) of a ring all-reduce of the step's gradients over every GPU (Horovod + NCCL)."""
    n, g = cluster.machines, cluster.gpus_per_machine
    stages = {"NVLink": 2 * (g - 1) / g * total_bytes / params.nccl_bus_bytes_per_s}
    if n > 1:
        rate = cluster.link_bytes_per_s * params.goodput_fraction * params.duplex_fraction
        stages["machine link"] = 2 * (n - 1) / n * total_bytes / rate
    bound = max(stages, key=stages.get)
    calls = math.ceil(total_bytes / params.fusion_bytes)
    steps = calls * 2 * (n * g - 1) * params.ring_step_s if n > 1 else 0.0
    return stages[bound] + steps, bound


def step_time(compute_s, communication_s, params, overlap=1.0):
    """A step: compute, plus the communication the backward pass cannot hide (overlap: the share of the
    backward pass that communication runs under; 0 where gradients are applied only after all arrived)."""
    hidden = overlap * params.backward_share * compute_s
    return compute_s + max(0.0, communication_s - hidden)
