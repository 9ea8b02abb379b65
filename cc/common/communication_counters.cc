#include "cc/common/communication_counters.h"

#include "cc/common/clock.h"

namespace bps {

CommunicationCounters& CommunicationCounters::OfProcess() {
  static CommunicationCounters* counters = new CommunicationCounters();  // never destroyed: used during exit
  return *counters;
}

void CommunicationCounters::PushPullEnded(double began) {
  std::lock_guard<std::mutex> lock(mu_);
  push_pull_.Add(began, NowSeconds());
}

void CommunicationCounters::WaitEnded(double seconds) {
  if (seconds <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  const double now = NowSeconds();
  wait_.Add(now - seconds, now);
}

void CommunicationCounters::Pushed(uint64_t bytes, uint64_t uncompressed_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  totals_.bytes_pushed += bytes;
  totals_.uncompressed_bytes_pushed += uncompressed_bytes;
}

void CommunicationCounters::Pulled(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  totals_.bytes_pulled += bytes;
}

void CommunicationCounters::MessageSent(int server) {
  std::lock_guard<std::mutex> lock(mu_);
  ++totals_.messages_sent;
  ++totals_.messages_sent_to_server[server];
}

void CommunicationCounters::MessageReceived() {
  std::lock_guard<std::mutex> lock(mu_);
  ++totals_.messages_received;
}

void CommunicationCounters::PushedInPlace(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  totals_.bytes_pushed_in_place += bytes;
}

void CommunicationCounters::LatePush() {
  std::lock_guard<std::mutex> lock(mu_);
  ++totals_.late_pushes;
}

void CommunicationCounters::Behind(uint64_t key, uint64_t behind) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, added] = behind_by_key_.try_emplace(key, behind);
  if (!added) {
    if (--keys_by_behind_[it->second] == 0) keys_by_behind_.erase(it->second);
    it->second = behind;
  }
  ++keys_by_behind_[behind];
  totals_.rounds_behind = keys_by_behind_.begin()->first;
}

void CommunicationCounters::ForgetRoundsBehind() {
  std::lock_guard<std::mutex> lock(mu_);
  behind_by_key_.clear();
  keys_by_behind_.clear();
  totals_.rounds_behind = 0;
}

CommunicationTotals CommunicationCounters::Totals() {
  std::lock_guard<std::mutex> lock(mu_);
  CommunicationTotals totals = totals_;
  totals.push_pull_seconds = push_pull_.total();
  totals.wait_seconds = wait_.total();
  return totals;
}

}  // namespace bps
