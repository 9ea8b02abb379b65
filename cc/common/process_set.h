// A process set: the worker ranks that take part in a collective, in order; empty means every worker.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cc/common/status.h"

namespace bps {

inline bool InProcessSet(const std::vector<int32_t>& members, int rank) {
  return members.empty() || std::find(members.begin(), members.end(), rank) != members.end();
}

// OK when worker `rank` may take part in `what` ("push_pull of 'w'"); otherwise the error to report.
inline Status CheckInProcessSet(const std::vector<int32_t>& members, int rank, const std::string& what) {
  if (InProcessSet(members, rank)) return Status::OK();
  return InvalidArgument(what + ": worker " + std::to_string(rank) + " is not in its process set");
}

}  // namespace bps
