#include "cc/ps/async_store.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "cc/reducer/cpu_reducer.h"

namespace bps {

AsyncStore::Key& AsyncStore::KeyFor(const KeySpec& spec, std::vector<AsyncReply>* out) {
  Key& k = keys_[spec.key];
  const bool replanned = !k.clock.empty() && (k.spec.dtype != spec.dtype || k.spec.count != spec.count ||
                                              k.spec.participants != spec.participants);
  if (replanned) {
    // A push of the last generation that reached the store after Clear left the key under its old plan: the
    // new plan's tensor starts afresh (its buffers sized for it), and whoever the old one held is told.
    for (const ParkedPull& pull : k.held) {
      AsyncReply gone = Answer(k.spec, pull, nullptr, 0);
      gone.status = Aborted("key " + std::to_string(spec.key) + " was planned anew");
      out->push_back(gone);
    }
    k = Key();
  }
  if (k.clock.empty()) {
    k.spec = spec;
    k.clock.assign(static_cast<size_t>(std::max(spec.participants, 1)), 0);
  }
  return k;
}

std::shared_ptr<const std::vector<char>> AsyncStore::Snapshot(const Key& k) const {
  auto out = std::make_shared<std::vector<char>>(k.spec.count * DataTypeSize(k.spec.dtype));
  LoadFromAccumulator(k.spec.dtype, k.weights.get(), out->data(), k.spec.count);
  return out;
}

int AsyncStore::Slowest(const Key& k) const {
  int slowest = -1;
  for (int r = 0; r < static_cast<int>(k.clock.size()); ++r) {
    if (k.finished.count(r)) continue;
    if (slowest < 0 || k.clock[r] < k.clock[slowest]) slowest = r;
  }
  return slowest;
}

bool AsyncStore::Ahead(const Key& k, int rank) const {
  if (staleness_ < 0) return false;
  const int slowest = Slowest(k);
  if (slowest < 0) return false;
  return k.clock[rank] > k.clock[slowest] + static_cast<uint64_t>(staleness_);
}

AsyncReply AsyncStore::Answer(const KeySpec& spec, const ParkedPull& pull,
                              std::shared_ptr<const std::vector<char>> weights, double held_seconds) {
  AsyncReply reply;
  reply.to = pull;
  reply.key = spec.key;
  reply.dtype = spec.dtype;
  reply.count = spec.count;
  reply.weights = std::move(weights);
  reply.held_seconds = held_seconds;
  return reply;
}

void AsyncStore::Release(Key& k, double now, std::vector<AsyncReply>* out) {
  std::vector<ParkedPull> still;
  std::shared_ptr<const std::vector<char>> weights;
  for (const ParkedPull& pull : k.held) {
    if (Ahead(k, pull.rank)) {
      still.push_back(pull);
      continue;
    }
    if (!weights) weights = Snapshot(k);
    out->push_back(Answer(k.spec, pull, weights, std::max(0.0, now - pull.arrived)));
  }
  k.held.swap(still);
}

std::vector<AsyncReply> AsyncStore::Push(const KeySpec& spec, const ParkedPull& pull, const void* data) {
  std::vector<AsyncReply> out;
  std::lock_guard<std::mutex> lock(mu_);
  Key& k = KeyFor(spec, &out);
  if (pull.rank < 0 || pull.rank >= static_cast<int>(k.clock.size())) {
    AsyncReply error = Answer(spec, pull, nullptr, 0);
    error.status = InvalidArgument("contribution " + std::to_string(pull.rank) + " is out of key " +
                                   std::to_string(spec.key) + "'s " + std::to_string(k.clock.size()));
    out.push_back(error);
    return out;
  }
  const size_t acc_bytes = spec.count * DataTypeSize(AccumulatorType(spec.dtype));
  if (pull.round <= 1) {
    // An initial push: the first sets the weights; later ones find them set.
    if (!k.initialised) {
      k.weights.reset(new char[acc_bytes]);
      if (data != nullptr) {
        StoreToAccumulator(spec.dtype, k.weights.get(), data, spec.count);
      } else {
        std::memset(k.weights.get(), 0, acc_bytes);
      }
      k.initialised = true;
    }
    out.push_back(Answer(spec, pull, Snapshot(k), 0));
    return out;
  }
  if (!k.initialised) {
    const int rank = ContributorRank(spec.scope, spec.members, spec.root, pull.rank);
    AsyncReply error = Answer(spec, pull, nullptr, 0);
    error.status = FailedPrecondition(
        "worker " + std::to_string(rank) + " pushed a change of key " + std::to_string(spec.key) +
        " (round " + std::to_string(pull.round) + "), whose weights this server does not hold: in asynchronous "
        "training the servers keep the model, and a server that was started again has lost it; restart the job "
        "from a checkpoint");
    out.push_back(error);
    return out;
  }
  if (data != nullptr) AddToAccumulator(spec.dtype, k.weights.get(), data, spec.count);
  k.clock[pull.rank]++;
  if (Ahead(k, pull.rank)) {
    k.held.push_back(pull);
  } else {
    out.push_back(Answer(spec, pull, Snapshot(k), 0));
  }
  Release(k, pull.arrived, &out);
  return out;
}

std::vector<AsyncReply> AsyncStore::Finished(const KeySpec& spec, const std::set<int>& contributors) {
  std::vector<AsyncReply> out;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = keys_.find(spec.key);
  if (it == keys_.end()) return out;
  Key& k = it->second;
  for (int c : contributors) k.finished.insert(c);
  double latest = 0;
  for (const ParkedPull& pull : k.held) latest = std::max(latest, pull.arrived);
  Release(k, latest, &out);
  return out;
}

std::vector<AsyncReply> AsyncStore::Expire(double now) {
  std::vector<AsyncReply> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& entry : keys_) {
    Key& k = entry.second;
    std::vector<ParkedPull> still;
    for (const ParkedPull& pull : k.held) {
      if (now - pull.arrived < timeout_s_) {
        still.push_back(pull);
        continue;
      }
      const KeySpec& s = k.spec;
      const int slowest = Slowest(k);
      std::ostringstream text;
      text << "worker " << ContributorRank(s.scope, s.members, s.root, pull.rank) << " is more than BYTEPS_STALENESS="
           << staleness_ << " steps ahead of the slowest worker, worker "
           << ContributorRank(s.scope, s.members, s.root, slowest) << " (key " << entry.first << ": step "
           << k.clock[pull.rank] << " against " << k.clock[slowest] << "), which did not catch up within "
           << "BYTEPS_TIMEOUT=" << timeout_s_ << " s; that worker may have stopped or be far slower (raise "
           << "BYTEPS_TIMEOUT or BYTEPS_STALENESS)";
      AsyncReply error = Answer(entry.second.spec, pull, nullptr, 0);
      error.status = DeadlineExceeded(text.str());
      out.push_back(error);
    }
    k.held.swap(still);
  }
  return out;
}

std::vector<AsyncReply> AsyncStore::Clear(const Status& why) {
  std::vector<AsyncReply> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& entry : keys_) {
    for (const ParkedPull& pull : entry.second.held) {
      AsyncReply error = Answer(entry.second.spec, pull, nullptr, 0);
      error.status = why;
      out.push_back(error);
    }
  }
  keys_.clear();
  return out;
}

StatusOr<std::vector<char>> AsyncStore::Weights(uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = keys_.find(key);
  if (it == keys_.end() || !it->second.initialised) return FailedPrecondition("key " + std::to_string(key) + " holds no weights");
  return *Snapshot(it->second);
}

std::vector<uint64_t> AsyncStore::Clocks(uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = keys_.find(key);
  return it == keys_.end() ? std::vector<uint64_t>{} : it->second.clock;
}

}  // namespace bps
