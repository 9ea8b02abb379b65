// Asynchronous training's state on a server (BYTEPS_ENABLE_ASYNC, BYTEPS_STALENESS): the model's weights,
// key by key (the keys of tensors pushed with ReduceOp::kWeights; every other key is summed round by round). There are no rounds: a worker applies its optimizer itself and pushes the change of its
// weights; the server adds it, in arrival order, and answers with the weights as they are then, which the
// worker continues from.
//
// Protocol, per key and worker: a worker's first push of a key (round 1 of its engine) is an initial push
// of its weights. The first one to arrive sets the key's weights; later ones change nothing (after the
// initial broadcast every worker starts from the same weights) and are answered with the current weights.
// Every later push is a change, added exactly once. A change for a key that holds no weights is an error:
// the server lost them (it was started again), and asynchronous training cannot go on without the model.
//
// Bounded staleness (staleness s >= 0): each worker's clock of a key counts the changes it pushed. The reply
// to a change that puts its worker more than s ahead of the slowest worker still training (clock - min > s)
// is held until the slowest catches up, or fails after the timeout naming the slowest. With s = 0 every
// worker's step waits for every other's: all get the same weights, as in synchronous training.
//
// Thread-safe: pushes of one key arrive from several transport threads. The caller sends the replies.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "cc/common/status.h"
#include "cc/ps/message.h"
#include "cc/ps/round_settler.h"

namespace bps {

// An answer to a push: the key's weights (in the key's dtype), or an error.
struct AsyncReply {
  ParkedPull to;
  uint64_t key = 0;
  DataType dtype = DataType::kFloat32;  // the key's
  uint64_t count = 0;
  Status status;
  std::shared_ptr<const std::vector<char>> weights;  // the same snapshot for replies released together
  double held_seconds = 0;  // how long a change's reply was held for the slowest worker
};

class AsyncStore {
 public:
  // `staleness` < 0: unbounded (plain asynchronous training). `timeout_s`: how long a reply may be held.
  AsyncStore(int staleness, double timeout_s) : staleness_(staleness), timeout_s_(timeout_s) {}

  // Worker `pull.rank` (a contribution index of `spec`) pushed `data` (spec.count elements of spec.dtype;
  // null: zeros) as its round `pull.round` of the key. Returns the replies due now: this push's unless it
  // is held, and those of held pushes its arrival released.
  std::vector<AsyncReply> Push(const KeySpec& spec, const ParkedPull& pull, const void* data);
  // Contributors of `spec` that finished (they push no more): the others no longer wait for them.
  std::vector<AsyncReply> Finished(const KeySpec& spec, const std::set<int>& contributors);
  // Fails the replies held longer than the timeout at `now`, naming the slowest worker.
  std::vector<AsyncReply> Expire(double now);
  // Forgets every key (a generation ended); held replies fail with `why`.
  std::vector<AsyncReply> Clear(const Status& why);

  // The key's weights and each contributor's clock (tests, diagnostics); an error for an unknown key.
  StatusOr<std::vector<char>> Weights(uint64_t key);
  std::vector<uint64_t> Clocks(uint64_t key);

 private:
  struct Key {
    KeySpec spec;
    bool initialised = false;
    std::unique_ptr<char[]> weights;  // spec.count elements of AccumulatorType(spec.dtype)
    std::vector<uint64_t> clock;      // changes pushed, per contributor
    std::set<int> finished;
    std::vector<ParkedPull> held;
  };
  // The key's state, made for `spec`; a key last planned with another dtype, size or contributor count starts
  // afresh (its held replies, failed, go to `out`).
  Key& KeyFor(const KeySpec& spec, std::vector<AsyncReply>* out);
  std::shared_ptr<const std::vector<char>> Snapshot(const Key& k) const;
  // The slowest contributor still training, or -1 when none is.
  int Slowest(const Key& k) const;
  bool Ahead(const Key& k, int rank) const;
  void Release(Key& k, double now, std::vector<AsyncReply>* out);
  static AsyncReply Answer(const KeySpec& spec, const ParkedPull& pull,
                           std::shared_ptr<const std::vector<char>> weights, double held_seconds);

  const int staleness_;
  const double timeout_s_;
  std::mutex mu_;
  std::map<uint64_t, Key> keys_;
};

}  // namespace bps
