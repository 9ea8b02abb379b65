#include "cc/ps/round_settler.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "cc/common/logging.h"
#include "cc/common/rank_list.h"
#include "cc/ps/timeouts.h"

namespace bps {

void RoundSettler::Settle(uint64_t key, ServerKey* entry) {
  if (!entry->round) return;
  KeyRound& round = *entry->round;
  if (round.round_started()) {
    for (int index : contributors_.joined(entry->spec)) {
      if (round.HasPushed(index)) continue;
      auto completed = round.AddAbsent(index, round.accumulating_round());
      if (!completed.ok()) {
        BPS_LOG(Error) << "key " << key << ": " << completed.status().message();
      }
      if (!completed.ok() || completed.value()) break;
    }
  }
  std::vector<ParkedPull> ready;
  std::vector<ParkedPull> still_waiting;
  for (const ParkedPull& parked : entry->parked) {
    (parked.round <= round.completed_round() ? ready : still_waiting).push_back(parked);
  }
  entry->parked.swap(still_waiting);
  // The round was complete once its last contribution arrived: everyone before waited for it.
  double last_arrival = 0;
  for (const ParkedPull& parked : ready) last_arrival = std::max(last_arrival, parked.arrived);
  for (const ParkedPull& parked : ready) Answer(key, entry, parked, last_arrival - parked.arrived);
  FailIfWaitingOnFinished(key, entry);
}

void RoundSettler::Answer(uint64_t key, ServerKey* entry, const ParkedPull& pull, double held_seconds) {
  const KeyRound& round = *entry->round;
  if (!round.Retains(pull.round)) {
    return ReplyError(pull, key,
                      FailedPrecondition("pull of round " + std::to_string(pull.round) + " but round " +
                                         std::to_string(round.completed_round()) + " is the latest"));
  }
  Message reply;
  reply.type = MessageType::kPullReply;
  reply.request_id = pull.request_id;
  reply.key = key;
  reply.round = pull.round;
  reply.dtype = round.dtype();
  reply.num_elements = round.num_elements();
  reply.held_us = static_cast<uint64_t>(held_seconds * 1e6);
  // A gather's partitions are mostly zeros or one worker's rows: those need no bytes back.
  reply.late = pull.late;
  if (round.contributions_needed() < round.num_workers()) reply.latest = round.completed_round();
  reply.heap_mapped = pull.heap_mapped;
  if (pull.output != nullptr) {
    // In place: the sum goes where the worker said, now unless it is there already.
    if (!round.result_written_in_place(pull.round)) {
      std::memcpy(pull.output, round.result(pull.round), round.bytes());
    }
    reply.written = true;
    return Deliver(pull, reply, nullptr, 0);
  }
  if (round.result_written_in_place(pull.round)) {
    // (Only pushes in place take part in such a round: nobody else can ask for it.)
    return ReplyError(pull, key, Internal("round " + std::to_string(pull.round) + "'s sum went to its pushers only"));
  }
  reply.zeros = round.result_is_zero(pull.round);
  reply.echo = round.result_sole_contributor(pull.round) == pull.rank;
  bool payload = !reply.zeros && !reply.echo;
  if (pull.share != ShareMode::kNone && round.shared()) {
    // A worker on this host: its next push goes straight into its receive buffer, and once it has mapped
    // the arena it copies the sum out itself.
    reply.shared_receive = round.ReceiveOffset(pull.rank);
    if (pull.share == ShareMode::kOffer) reply.text = arena_locator_();
    if (pull.share == ShareMode::kMapped && payload) {
      reply.shared_result = round.result_offset(pull.round);
      payload = false;
    }
  }
  if (!payload) return Deliver(pull, reply, nullptr, 0);
  Deliver(pull, reply, round.result(pull.round), round.wire_bytes(),
          pull.fused ? nullptr : entry->weak_from_this().lock());
}

void RoundSettler::Deliver(const ParkedPull& pull, const Message& reply, const void* payload, size_t bytes,
                           std::shared_ptr<const void> owner) {
  if (pull.fused) return pull.fused->Set(pull.member, reply, payload, bytes);  // copies the payload
  SendCallback keep;
  if (owner) keep = [owner](const Status&) {};  // the buffer lives until it is sent
  transport_->Send(pull.peer, reply.Encode(), payload, bytes, std::move(keep));
}

void RoundSettler::FailIfWaitingOnFinished(uint64_t key, ServerKey* entry) {
  // Readers of a published key may wait before its round has started; pushers only once it has.
  const bool readers_only = entry->spec.scope == TensorScope::kPublished;
  if (!entry->round || entry->parked.empty() || (!readers_only && !entry->round->round_started())) return;
  std::set<int> finished = contributors_.finished(entry->spec);
  if (!entry->round->WaitsOn(finished)) return;
  std::set<int> gone;
  for (int missing : entry->round->MissingWorkers()) {
    if (finished.count(missing)) gone.insert(ContributorRank(entry->spec.scope, entry->spec.members,
                                                             entry->spec.root, missing));
  }
  if (gone.empty()) return;
  const char* who = entry->spec.scope == TensorScope::kMachine ? "worker machine(s) " : "worker(s) ";
  Status error = FailedPrecondition(who + RankList(gone) + " finished (called shutdown() or exited) without pushing "
                                    "round " + std::to_string(entry->round->accumulating_round()) +
                                    ": every worker must push_pull the same tensors");
  for (const ParkedPull& pull : entry->parked) ReplyError(pull, key, error);
  entry->parked.clear();
}

void RoundSettler::FailIfStale(uint64_t key, ServerKey* entry, double now) {
  const KeyRound& round = *entry->round;
  if (entry->parked.empty() || !round.round_started() ||
      now - round.round_started_at() < MissingWorkerTimeout(config_)) {
    return;
  }
  const char* who = entry->spec.scope == TensorScope::kMachine ? "worker machine(s) " : "worker(s) ";
  std::set<int> missing;
  for (int index : round.MissingWorkers()) {
    missing.insert(ContributorRank(entry->spec.scope, entry->spec.members, entry->spec.root, index));
  }
  std::ostringstream limit;
  limit << config_.timeout_s << " s";
  Status error = DeadlineExceeded(who + RankList(missing) + " did not push round " +
                                  std::to_string(round.accumulating_round()) + " within BYTEPS_TIMEOUT=" +
                                  limit.str() + "; every worker must push_pull the same tensors, each as "
                                  "many times as the others");
  if (round.held_by_window()) {
    // The round has its contributions; the servers keep only the window's results for late workers.
    error = DeadlineExceeded(who + RankList(missing) + " stayed more than BYTEPS_BACKUP_WINDOW=" +
                             std::to_string(round.window()) + " rounds behind round " +
                             std::to_string(round.accumulating_round()) + " for BYTEPS_TIMEOUT=" + limit.str() +
                             ": it stopped pushing, or is far slower than the others (a larger "
                             "BYTEPS_BACKUP_WINDOW lets workers fall further behind)");
  }
  for (const ParkedPull& pull : entry->parked) ReplyError(pull, key, error);
  entry->parked.clear();
}

void RoundSettler::ReplyError(const ParkedPull& pull, uint64_t key, const Status& error) {
  Message reply;
  reply.type = MessageType::kPullReply;
  reply.request_id = pull.request_id;
  reply.key = key;
  reply.round = pull.round;
  reply.set_status(error);
  Deliver(pull, reply, nullptr, 0);
}

}  // namespace bps
