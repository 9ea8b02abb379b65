// What this process's push_pulls have cost since it started, for per-step metrics
// (bps_tf.numpy.communication_counters(), bps_tf.keras.callbacks.CommunicationMetrics): wall time spent in
// push_pull, the part of it a server held this worker's pushes waiting for the other workers, the bytes
// pushed and pulled, and the messages that carried them (per server, to compare with the partition plan).
// Shared by the engine, the worker's client and the GPU path, like the timeline.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

#include "cc/common/covered_time.h"

namespace bps {

struct CommunicationTotals {
  double push_pull_seconds = 0;  // wall time with at least one push_pull in flight
  double wait_seconds = 0;       // wall time with at least one push held by a server until the others pushed
  uint64_t bytes_pushed = 0;     // as they travel (encoded when compressed), over the network or shared memory
  uint64_t bytes_pulled = 0;     // the sums received, likewise
  uint64_t uncompressed_bytes_pushed = 0;  // what the same pushes would have been without compression
  // Of bytes_pushed, those a server on this host read where they lay in this process's memory (pushes in
  // place: its sums were written there too).
  uint64_t bytes_pushed_in_place = 0;
  // Messages to and from servers (pushes, fetches, residuals; their replies), whatever carried their
  // payloads: a message holding several partitions counts once.
  uint64_t messages_sent = 0;
  uint64_t messages_received = 0;
  std::map<int, uint64_t> messages_sent_to_server;  // by server index
  // Backup workers: pushes that reached their server after their round had its contributions (dropped; the
  // round's sum came back).
  uint64_t late_pushes = 0;
  // Backup workers: the fewest, over the gradients' partitions, of how many more rounds their server had
  // completed than the one the newest reply to this worker's push was for (0: on time). So many of this
  // worker's next rounds are complete for every gradient: their pushes will be late, whatever they hold.
  uint64_t rounds_behind = 0;
};

class CommunicationCounters {
 public:
  static CommunicationCounters& OfProcess();

  // A push_pull (or, on GPUs, the whole of one with its local reduction and copies) ran from `began` until now.
  void PushPullEnded(double began);
  // A sum arrived now whose push a server held `seconds` for other workers' pushes of the round.
  void WaitEnded(double seconds);
  void Pushed(uint64_t bytes, uint64_t uncompressed_bytes);
  void Pulled(uint64_t bytes);
  void PushedInPlace(uint64_t bytes);
  void MessageSent(int server);
  void MessageReceived();
  void LatePush();
  // A reply to a push of partition `key` of a gradient (backup workers) said its server had completed
  // `behind` more rounds.
  void Behind(uint64_t key, uint64_t behind);
  // A new engine (init() after shutdown(), an elastic reset) starts its rounds afresh: rounds_behind is 0
  // until its replies say otherwise.
  void ForgetRoundsBehind();

  CommunicationTotals Totals();

 private:
  std::mutex mu_;
  CoveredTime push_pull_;
  CoveredTime wait_;
  CommunicationTotals totals_;
  std::map<uint64_t, uint64_t> behind_by_key_;   // a partition's key -> its rounds behind
  std::map<uint64_t, uint64_t> keys_by_behind_;  // rounds behind -> how many keys are so many behind
};

}  // namespace bps
