"""What the scheduler's partition planner (cc/ps/partition_planner.cc) makes of a step's gradients: pieces of
at most a partition, a tensor of up to servers x partition bytes spread over as many servers as pieces of at
least min_spread_bytes allow, each piece on the server with the fewest bytes so far, and between machines over
TCP each piece in slices."""

import dataclasses

MIN_SPREAD_BYTES = 262144  # PartitionPlanner::kMinSpreadBytes


@dataclasses.dataclass(frozen=True)
class Plan:
    total_bytes: int
    server_bytes: tuple  # bytes each server sums per worker
    server_units: tuple  # slices (or whole partitions) each server answers per worker
    units: int  # slices (or partitions) a worker pushes
    largest_unit: int
    tensors: int


def plan(tensor_bytes, servers, partition_bytes, slice_bytes=None, min_spread_bytes=MIN_SPREAD_BYTES, element_bytes=4):
    """tensor_bytes: each gradient's bytes; slice_bytes None: partitions cross whole (RDMA)."""
    loads, units = [0] * servers, [0] * servers
    count, largest = 0, 0
    for total in tensor_bytes:
        elements = max(1, total // element_bytes)
        spread = max(min_spread_bytes, -(-elements * element_bytes // servers))
        per_partition = max(1, min(partition_bytes, spread) // element_bytes)
        per_slice = per_partition if not slice_bytes else min(per_partition, max(1, slice_bytes // element_bytes))
        for offset in range(0, elements, per_partition):
            piece = min(per_partition, elements - offset)
            server = loads.index(min(loads))
            loads[server] += piece * element_bytes
            slices = -(-piece // per_slice)
            units[server] += slices
            count += slices
            largest = max(largest, min(piece, per_slice) * element_bytes)
    return Plan(sum(tensor_bytes), tuple(loads), tuple(units), count, largest, len(tensor_bytes))
