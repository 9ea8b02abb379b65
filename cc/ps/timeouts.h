// How long the scheduler and the servers wait for a worker that is missing from a round or a declaration.
#pragma once

#include <algorithm>

#include "cc/common/config.h"

namespace bps {

// BYTEPS_TIMEOUT, and in an elastic job a margin more: a frozen worker falls silent at about the moment it
// stops pushing, and its connections are found dead after BYTEPS_TIMEOUT of silence. That loss must be
// seen first, because the job goes on without a lost worker, while a push or declaration that never came
// is an error (the workers' code took different paths).
inline double MissingWorkerTimeout(const Config& config) {
  return config.timeout_s + (config.elastic() ? std::max(2.0, config.timeout_s / 10) : 0.0);
}

}  // namespace bps
