// How a server ends a key's round for the workers waiting on it: each push (or fetch) is parked with its
// key until the round it asked for is complete, then answered with the sum (over the transport, or where it
// lies in the server's shared memory for a worker on this host). A round that cannot complete is answered
// with an error that names who is missing: contributors that finished without pushing, or that did not push
// within BYTEPS_TIMEOUT. Rounds of workers that joined (join()) complete without them. Runs on the key's
// summing thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cc/common/config.h"
#include "cc/common/status.h"
#include "cc/ps/fused_reply.h"
#include "cc/ps/key_round.h"
#include "cc/ps/message.h"
#include "cc/transport/transport.h"

namespace bps {

// A push (or fetch) waiting for its round's sum: the push is also the request for the sum.
struct ParkedPull {
  PeerId peer;
  int rank;  // the pusher's contribution index (kReader for a fetch)
  ShareMode share;
  uint64_t request_id;
  uint32_t round;
  double arrived = 0;  // when the push (or fetch) reached this server
  std::shared_ptr<FusedReply> fused;  // a member of a PUSH_MANY: its answer goes there, as member `member`
  size_t member = 0;
  bool late = false;  // backup workers: the push came after its round had its contributions (dropped)
  // A push in place (ShareMode::kInPlace): where its sum goes in the pusher's heap, and what keeps that
  // mapped; the reply then says `written`.
  void* output = nullptr;
  std::shared_ptr<const void> kept;
  bool heap_mapped = false;  // the push named its worker's heap, and this server maps it
};

// A key a server sums: its plan, its rounds, and who waits on them. Owned by a shared_ptr in a server (a
// reply sent from its buffers keeps it until the transport is done with them).
struct ServerKey : std::enable_shared_from_this<ServerKey> {
  KeySpec spec;
  // The arena `round`'s buffers may be in (declared first: it outlives `round`), kept as long as the key is,
  // which a reply still queued in a transport at shutdown may make longer than the server.
  std::shared_ptr<SharedArena> arena;
  std::unique_ptr<KeyRound> round;  // made on the first push
  std::vector<ParkedPull> parked;   // waiting for their round's sum; summing thread only
  // Its generation ended (set while the summing threads are held): a push that reached it before and is
  // summed after is refused, so that no sum is written into a worker's memory once the server reset.
  std::atomic<bool> retired{false};
};

class RoundSettler {
 public:
  // What the settler asks of the server's generation, per key: its contributors that finished, and those
  // of them that joined.
  struct Contributors {
    std::function<std::set<int>(const KeySpec&)> finished;
    std::function<std::set<int>(const KeySpec&)> joined;
  };

  // `arena_locator`: the name of the server's shared memory, for workers on its host that have not mapped it.
  RoundSettler(const Config& config, Transport* transport, Contributors contributors,
               std::function<std::string()> arena_locator)
      : config_(config),
        transport_(transport),
        contributors_(std::move(contributors)),
        arena_locator_(std::move(arena_locator)) {}

  // After a push or a worker's finish: counts the joined contributors as absent from the round, answers the
  // pulls of a completed round, and fails those of a round that waits on a contributor that finished.
  void Settle(uint64_t key, ServerKey* entry);
  // Answers `pull` with the result of its round (completed and kept); `held_seconds`: how long the round's
  // other contributions kept it waiting.
  void Answer(uint64_t key, ServerKey* entry, const ParkedPull& pull, double held_seconds = 0);
  // Fails the parked pulls of a round that waits on contributors who finished: it can never complete.
  void FailIfWaitingOnFinished(uint64_t key, ServerKey* entry);
  // Fails the parked pulls of a round that started more than the missing-worker timeout before `now`,
  // naming who did not push.
  void FailIfStale(uint64_t key, ServerKey* entry, double now);
  void ReplyError(const ParkedPull& pull, uint64_t key, const Status& error);

 private:
  // Sends `reply` to the pusher, or hands it to the fused reply it belongs to; `owner` (may be null) holds
  // `payload`'s memory, kept until the transport has sent it.
  void Deliver(const ParkedPull& pull, const Message& reply, const void* payload, size_t bytes,
               std::shared_ptr<const void> owner = nullptr);

  const Config& config_;
  Transport* const transport_;
  const Contributors contributors_;
  const std::function<std::string()> arena_locator_;
};

}  // namespace bps
