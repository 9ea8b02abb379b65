// Splits a tensor into partitions and places them on servers, balancing bytes per server; between hosts
// over TCP each partition is cut further into slices, which keep their partition's server but have keys of
// their own (each is summed and returned on its own). Small tensors planned one after another share a
// server, so that those a worker makes ready together can travel to it in one message (a fused push).
// Runs only on the scheduler, so every worker gets the same plan whatever order it declares in.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cc/ps/message.h"

namespace bps {

// Stable 64-bit hash of a tensor name (FNV-1a): the key does not depend on declaration order.
uint64_t HashName(const std::string& name);

constexpr int kPartitionIndexBits = 20;
inline uint64_t TensorKeyBase(const std::string& name) { return HashName(name) & ~((1ull << kPartitionIndexBits) - 1); }

class PartitionPlanner {
 public:
  // The smallest piece a tensor is spread in by default (BYTEPS_MIN_SPREAD_BYTES). Each piece costs a server
  // a push and a reply from every worker machine, against its bytes' time on the link: on links of a few
  // Gbit/s, 64 KB pieces that spread a tensor over every server win (a tensor on fewer servers than there
  // are makes their links take every worker's push at once while the others idle); on 100 Gbit/s links
  // larger ones do, which python -m bps_tf.plan recommends for a cluster.
  static constexpr uint64_t kDefaultMinSpreadBytes = 65536;
  // Small tensors share a server up to at least this many bytes, however small the pieces.
  static constexpr uint64_t kMinGroupBytes = 262144;

  PartitionPlanner(int num_servers, size_t partition_bytes, uint64_t min_spread_bytes = kDefaultMinSpreadBytes)
      : partition_bytes_(partition_bytes),
        min_spread_bytes_(std::max<uint64_t>(1, min_spread_bytes)),
        server_bytes_(num_servers, 0) {}

  // Partitions of at most partition_bytes (whole elements; smaller so that a tensor spans every server,
  // down to the min spread), each on the server with the fewest bytes so far among those the tensor has
  // no piece on yet, in slices of at most
  // slice_bytes (0: one slice per partition). A tensor of one partition smaller than group_bytes() joins
  // the server of the small tensors planned just before it while their bytes stay within group_bytes().
  // The plan lists the slices, in tensor order.
  StatusOr<PartitionPlan> Plan(const TensorSpec& spec);

  void set_slice_bytes(size_t slice_bytes) { slice_bytes_ = slice_bytes; }

  const std::vector<uint64_t>& server_bytes() const { return server_bytes_; }
  uint64_t group_bytes() const { return GroupBytes(partition_bytes_, min_spread_bytes_); }

  // The most bytes of small tensors grouped on one server, and of a worker's fused message: at least
  // kMinGroupBytes, as large as a spread piece above it, never more than a partition or than a fused
  // message may carry.
  static uint64_t GroupBytes(uint64_t partition_bytes, uint64_t min_spread_bytes) {
    const uint64_t group = std::min(partition_bytes, std::max(kMinGroupBytes, min_spread_bytes));
    return std::min<uint64_t>(group, FusedBody::kMaxPayloadBytes);
  }

 private:
  // The server for the next partition of `bytes`: the open group's for a small tensor with room in it,
  // otherwise the one with the fewest bytes among those the tensor has no piece on yet (which opens a new
  // group for a small tensor).
  // `taken`: the servers the tensor has pieces on.
  int PlaceOnServer(uint64_t bytes, bool small, std::vector<bool>* taken);

  size_t partition_bytes_;
  uint64_t min_spread_bytes_;
  size_t slice_bytes_ = 0;
  std::vector<uint64_t> server_bytes_;
  int group_server_ = -1;  // the server of the small tensors being grouped, -1: none yet
  uint64_t group_bytes_used_ = 0;
};

}  // namespace bps
