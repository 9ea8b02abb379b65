#include "cc/ps/partition_planner.h"

#include <algorithm>

namespace bps {

uint64_t HashName(const std::string& name) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : name) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

int PartitionPlanner::PlaceOnServer(uint64_t bytes, bool small, std::vector<bool>* taken) {
  if (!small || group_server_ < 0 || group_bytes_used_ + bytes > group_bytes()) {
    // The least loaded server this tensor has no piece on yet (every server, once it has one on each): a
    // spread tensor's pieces land on distinct servers even where the loads are uneven (a group's server).
    if (std::find(taken->begin(), taken->end(), false) == taken->end()) taken->assign(taken->size(), false);
    int least = -1;
    for (int s = 0; s < static_cast<int>(server_bytes_.size()); ++s) {
      if (!(*taken)[s] && (least < 0 || server_bytes_[s] < server_bytes_[least])) least = s;
    }
    (*taken)[least] = true;
    if (!small) return least;
    group_server_ = least;
    group_bytes_used_ = 0;
  }
  group_bytes_used_ += bytes;
  return group_server_;
}

StatusOr<PartitionPlan> PartitionPlanner::Plan(const TensorSpec& spec) {
  const size_t element = DataTypeSize(spec.dtype);
  const uint64_t total = spec.num_elements();
  // A tensor of one partition or less would sit on one server, whose link then carries every worker's
  // copy while the others idle: spread it over all servers, in pieces of at least the min spread.
  const uint64_t servers = server_bytes_.size();
  const uint64_t spread = std::max<uint64_t>(min_spread_bytes_, (total * element + servers - 1) / servers);
  const uint64_t per_partition = std::max<uint64_t>(1, std::min<uint64_t>(partition_bytes_, spread) / element);
  const uint64_t per_slice =
      slice_bytes_ == 0 ? per_partition : std::min(per_partition, std::max<uint64_t>(1, slice_bytes_ / element));
  const uint64_t slices_per_partition = (per_partition + per_slice - 1) / per_slice;
  const uint64_t count = (total + per_partition - 1) / per_partition * slices_per_partition;
  if (count >= (1ull << kPartitionIndexBits)) {
    return InvalidArgument("tensor '" + spec.name + "' would need " + std::to_string(count) +
                           " partitions or slices; raise BYTEPS_PARTITION_BYTES or BYTEPS_SLICE_BYTES");
  }
  PartitionPlan plan;
  const uint64_t base = TensorKeyBase(spec.name);
  const uint64_t partitions = (total + per_partition - 1) / per_partition;
  const bool small = partitions <= 1 && total * element < group_bytes();
  std::vector<bool> taken(servers, false);  // the servers that hold a piece of this tensor
  for (uint64_t offset = 0, partition = 0; offset < total; offset += per_partition, ++partition) {
    const uint64_t partition_count = std::min(per_partition, total - offset);
    const int server = PlaceOnServer(partition_count * element, small, &taken);
    server_bytes_[server] += partition_count * element;
    for (uint64_t at = offset, slice = 0; at < offset + partition_count; at += per_slice, ++slice) {
      Partition p;
      // Workers send a tensor's pieces in key order (at equal priority): slice 0 of every partition, then
      // slice 1, ..., so that consecutive sends go to different servers and every server link stays busy.
      p.key = base | (slice * partitions + partition);
      p.offset = at;
      p.count = std::min(per_slice, offset + partition_count - at);
      p.server = server;
      plan.partitions.push_back(p);
    }
  }
  return plan;
}

}  // namespace bps
