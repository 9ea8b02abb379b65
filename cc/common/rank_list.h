// "0, 2, 5": ranks for error messages that say who is missing.
#pragma once

#include <set>
#include <string>

namespace bps {

inline std::string RankList(const std::set<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

}  // namespace bps
