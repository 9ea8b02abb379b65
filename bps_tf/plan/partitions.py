"""What the scheduler's partition planner (cc/ps/partition_planner.cc) makes of a step's gradients: pieces of
at most a partition, a tensor of up to servers x partition bytes spread over as many servers as pieces of at
least min_spread_bytes allow, each piece on the server with the fewest bytes so far among those the tensor
has no piece on yet, small tensors planned
in a row grouped on one server up to a group's bytes (group_bytes; a worker process pushes its ready members
of a group as one message, whose bytes a worker caps at a group's: WorkerOperations::fused_message_bytes),
and between machines over TCP each piece in slices."""

import dataclasses

MIN_SPREAD_BYTES = 65536  # BYTEPS_MIN_SPREAD_BYTES' default (PartitionPlanner::kDefaultMinSpreadBytes)
MIN_GROUP_BYTES = 262144  # PartitionPlanner::kMinGroupBytes
MAX_FUSED_BYTES = 64 << 20  # FusedBody::kMaxPayloadBytes: the most a fused message may carry


@dataclasses.dataclass(frozen=True)
class Plan:
    total_bytes: int
    server_bytes: tuple  # bytes each server sums per worker
    server_units: tuple  # slices (or whole partitions) each server answers per worker
    units: int  # slices (or partitions) a worker pushes
    largest_unit: int
    tensors: int
    server_messages: tuple = ()  # pushes each server takes per worker machine, a group's small tensors fused
    messages: int = 0  # pushes a worker machine's processes send (each answered by one reply)
    owner_messages: tuple = ()  # pushes each process of a worker machine sends
    owner_bytes: tuple = ()  # bytes each process of a worker machine pushes


class _Servers:
    """Bytes per server, and the open group of small tensors (PartitionPlanner::PlaceOnServer)."""

    def __init__(self, servers, group_bytes):
        self.loads = [0] * servers
        self.group_bytes = group_bytes
        self.group_server, self.group_used, self.group_owners = None, 0, set()
        self.group_pushes = [0] * servers  # fused pushes of the groups on each server
        self.owner_pushes = {}  # fused pushes of each process

    def place(self, nbytes, small, owner, taken):
        """The server of a piece of nbytes; each process fuses its own members of a group (all its slices
        over TCP, each smaller than the group) into one message. taken: the servers the tensor has pieces on
        (every one of them once it has a piece on each)."""
        if not small or self.group_server is None or self.group_used + nbytes > self.group_bytes:
            if len(taken) == len(self.loads):
                taken.clear()
            least = min((s for s in range(len(self.loads)) if s not in taken), key=lambda s: self.loads[s])
            taken.add(least)
            if not small:
                self.loads[least] += nbytes
                return least
            self.group_server, self.group_used, self.group_owners = least, 0, set()
        if owner not in self.group_owners:
            self.group_owners.add(owner)
            self.group_pushes[self.group_server] += 1
            self.owner_pushes[owner] = self.owner_pushes.get(owner, 0) + 1
        self.group_used += nbytes
        self.loads[self.group_server] += nbytes
        return self.group_server


def group_bytes(partition_bytes, min_spread_bytes=MIN_SPREAD_BYTES):
    """The most bytes of small tensors grouped on one server, and of a worker's fused message
    (PartitionPlanner::GroupBytes)."""
    return min(partition_bytes, max(MIN_GROUP_BYTES, min_spread_bytes), MAX_FUSED_BYTES)


def plan(tensor_bytes, servers, partition_bytes, slice_bytes=None, min_spread_bytes=MIN_SPREAD_BYTES, element_bytes=4,
         owners=None):
    """tensor_bytes: each gradient's bytes, in the order the scheduler plans them; slice_bytes None:
    partitions cross whole (RDMA); owners: the process of its machine that pushes each (all one if None)."""
    placed = _Servers(servers, group_bytes(partition_bytes, min_spread_bytes))
    units = [0] * servers
    large_units = [0] * servers  # units of tensors that are not grouped
    owner_units, owner_bytes = {}, {}  # units of tensors that are not grouped, and all bytes, per process
    count, largest = 0, 0
    for index, total in enumerate(tensor_bytes):
        owner = 0 if owners is None else owners[index]
        owner_bytes[owner] = owner_bytes.get(owner, 0) + total
        elements = max(1, total // element_bytes)
        spread = max(min_spread_bytes, -(-elements * element_bytes // servers))
        per_partition = max(1, min(partition_bytes, spread) // element_bytes)
        per_slice = per_partition if not slice_bytes else min(per_partition, max(1, slice_bytes // element_bytes))
        small = elements <= per_partition and elements * element_bytes < placed.group_bytes
        taken = set()  # the servers that hold a piece of this tensor
        for offset in range(0, elements, per_partition):
            piece = min(per_partition, elements - offset)
            slices = -(-piece // per_slice)
            server = placed.place(piece * element_bytes, small, owner, taken)
            units[server] += slices
            if not small:
                large_units[server] += slices
                owner_units[owner] = owner_units.get(owner, 0) + slices
            count += slices
            largest = max(largest, min(piece, per_slice) * element_bytes)
    server_messages = tuple(large + fused for large, fused in zip(large_units, placed.group_pushes))
    processes = range(max(owner_bytes, default=0) + 1)
    owner_messages = tuple(owner_units.get(p, 0) + placed.owner_pushes.get(p, 0) for p in processes)
    return Plan(sum(tensor_bytes), tuple(placed.loads), tuple(units), count, largest, len(tensor_bytes),
                server_messages, sum(server_messages), owner_messages,
                tuple(owner_bytes.get(p, 0) for p in processes))
