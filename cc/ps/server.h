// The server role: sums each key's partitions across all workers, round by round, on engine threads
// (BYTEPS_SERVER_ENGINE_THREAD), and sends each pusher the round's sum once it is complete.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cc/common/config.h"
#include "cc/common/one_shot.h"
#include "cc/common/shared_arena.h"
#include "cc/common/work_thread.h"
#include "cc/ps/key_round.h"
#include "cc/ps/message.h"
#include "cc/transport/transport.h"

namespace bps {

class Server : public MessageHandler {
 public:
  Server(const Config& config, Transport* transport);
  ~Server() override;

  // Registers with the scheduler and serves until the job ends: OK on SHUTDOWN, the error on ABORT or
  // when the scheduler or a worker is lost.
  Status Run();
  // Makes Run() return `why` (used when the process is told to stop).
  void Stop(const Status& why) { Finish(why); }

  void* PayloadDestination(PeerId from, const std::string& header, size_t length) override;
  void OnMessage(PeerId from, const std::string& header, void* payload, size_t length) override;
  void OnPeerLost(PeerId peer, const Status& why) override;

 private:
  struct ParkedPull {
    PeerId peer;
    int rank;  // the pusher's contribution index
    ShareMode share;
    uint64_t request_id;
    uint32_t round;
  };
  struct KeyEntry {
    std::unique_ptr<KeyRound> round;
    std::vector<ParkedPull> parked;  // pushers waiting for their round's sum; engine thread only
  };

  void CreateSharedArena();
  KeyEntry* FindOrCreateKey(const Message& m, Status* error);
  WorkThread& EngineFor(uint64_t key) { return *engines_[key % engines_.size()]; }
  void HandlePush(PeerId from, const Message& m, void* payload);
  void SumPush(uint64_t key, KeyEntry* entry, int rank, bool zeros, const ParkedPull& pull);
  void AnswerPull(uint64_t key, KeyEntry* entry, const ParkedPull& pull);
  void CheckStaleRounds(size_t engine_index);
  void ReplyError(PeerId to, MessageType type, const Message& request, const Status& error);
  void Finish(const Status& result);

  static constexpr double kAbortLingerSeconds = 0.5;
  // Address space reserved for keys shared with workers on this host; memory is used only as written.
  static constexpr size_t kSharedArenaBytes = size_t(256) << 30;

  const Config config_;
  Transport* transport_;
  std::vector<std::unique_ptr<WorkThread>> engines_;

  PeerId scheduler_ = -1;
  OneShot<Message> address_book_;
  OneShot<Status> finished_;
  int num_workers_ = 0;  // set by the address book before any push can arrive
  std::unique_ptr<SharedArena> arena_;  // likewise; null without workers on this host

  std::mutex keys_mu_;  // guards the map; a KeyEntry is used by its engine thread once created
  std::map<uint64_t, KeyEntry> keys_;
};

}  // namespace bps
