// The server role: sums each key's partitions across all workers, round by round, on summing threads
// (BYTEPS_SERVER_ENGINE_THREAD), and sends each pusher the round's sum once it is complete.
//
// Nothing from the wire is trusted: the scheduler's messages are taken from the scheduler's connection
// only; a worker's connection speaks for one rank, proven by the token the scheduler gave that worker
// (IDENTIFY); every push is checked against the key's plan, which the scheduler sends before any worker
// learns it (dtype, element count, contributors, the pusher's place among them). A failed allocation is
// an error reply, never an abort.
//
// Generations: a RESET forgets every key. After a generation that broke (a worker was lost, elastic) pushes
// may still be arriving into the keys' buffers and their sums may still be read from shared memory, so the
// dropped keys are kept, unused, until every worker that was identified then has identified again (it has
// left that generation behind) or is gone. An elastic job's generations each bring a new address book: the
// workers, their tokens, and who they are, anew.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cc/common/config.h"
#include "cc/common/logging.h"
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
  // when the scheduler is lost.
  Status Run();
  // Makes Run() return `why` (used when the process is told to stop).
  void Stop(const Status& why) { Finish(why); }

  void* PayloadDestination(PeerId from, const std::string& header, size_t length) override;
  void OnMessage(PeerId from, const std::string& header, void* payload, size_t length) override;
  void OnPeerLost(PeerId peer, const Status& why) override;

 private:
  struct ParkedPull {
    PeerId peer;
    int rank;  // the pusher's contribution index (kReader for a fetch)
    ShareMode share;
    uint64_t request_id;
    uint32_t round;
    double arrived = 0;  // when the push (or fetch) reached this server
  };
  struct KeyEntry {
    KeySpec spec;
    std::unique_ptr<KeyRound> round;  // made on the first push
    std::vector<ParkedPull> parked;   // pushers waiting for their round's sum; summing thread only
  };

  void OnSchedulerMessage(const Message& m);
  void OnAddressBook(const Message& m);
  void HandleIdentify(PeerId from, const Message& m);
  void HandleKeyPlan(const Message& m);
  void HandleWorkerFinished(int rank, bool joined);
  void HandleReset(bool dropped);
  // Dropped keys whose buffers `holders` may still use; freed once none does (see above).
  struct Retired {
    std::map<uint64_t, KeyEntry> keys;
    std::set<PeerId> holders;
  };
  // `peer` identified again or is gone: it holds no dropped keys any more. With keys_mu_ held.
  void ReleaseRetired(PeerId peer);
  void CreateSharedArena();
  // The key a push (or, `fetch`, a fetch) from `from` goes to, checked against its plan and the connection's
  // rank. nullptr with `error` OK: the connection is no identified worker (no answer is due).
  KeyEntry* CheckedKey(PeerId from, const Message& m, Status* error, bool fetch = false);
  WorkThread& SumThreadFor(uint64_t key) { return *sum_threads_[key % sum_threads_.size()]; }
  void HandlePush(PeerId from, const Message& m, void* payload);
  // A reader of a published key: answered with round m.round once the publisher pushed it.
  void HandleFetch(PeerId from, const Message& m);
  // SAVE_RESIDUAL / LOAD_RESIDUAL of a compressed key (checkpoints of its error feedback).
  void HandleResidual(PeerId from, const Message& m, void* payload);
  void SumPush(uint64_t key, KeyEntry* entry, int rank, bool zeros, const ParkedPull& pull);
  // After a push or a worker's finish: counts the joined workers as absent from the round, answers the pulls
  // of a completed round, and fails those of a round that waits on a worker that finished without joining.
  void SettleRound(uint64_t key, KeyEntry* entry);
  // `held_seconds`: how long the round's other contributions kept `pull` waiting.
  void AnswerPull(uint64_t key, KeyEntry* entry, const ParkedPull& pull, double held_seconds = 0);
  // Fails the parked pulls of a round that waits on contributors who finished: it can never complete.
  void FailRoundWaitingOnFinished(uint64_t key, KeyEntry* entry);
  void CheckStaleRounds(size_t thread_index);
  void ReplyError(PeerId to, const ParkedPull& pull, uint64_t key, const Status& error);
  void Finish(const Status& result);
  // Contributors of a key that finished: worker ranks, or machines all of whose processes finished.
  std::set<int> FinishedContributors(const KeySpec& spec);
  // Those of them that joined (their rounds complete without them).
  std::set<int> JoinedContributors(const KeySpec& spec);
  std::set<int> ContributorsAmong(const KeySpec& spec, const std::set<int>& workers);  // with keys_mu_ held

  static constexpr double kAbortLingerSeconds = 0.5;
  // Address space reserved for keys shared with workers on this host; memory is used only as written.
  static constexpr size_t kSharedArenaBytes = size_t(256) << 30;

  const Config config_;
  Transport* transport_;
  std::vector<std::unique_ptr<WorkThread>> sum_threads_;

  PeerId scheduler_ = -1;
  OneShot<Message> address_book_;
  OneShot<Status> finished_;
  // Set by the address book, before any worker can connect.
  int num_workers_ = 0;
  int local_size_ = 1;
  std::vector<std::string> worker_tokens_;
  std::unique_ptr<SharedArena> arena_;  // null without workers on this host

  std::mutex keys_mu_;  // guards the maps below; a KeyEntry's round is used by its summing thread once created
  std::map<uint64_t, KeyEntry> keys_;
  std::map<PeerId, int> rank_of_;   // identified worker connections
  std::map<int, PeerId> peer_of_;   // and the other way
  std::set<int> finished_workers_;  // this generation's
  std::set<int> joined_workers_;    // those of them that joined
  std::vector<Retired> retired_;
  bool dropped_generation_ = false;  // the last RESET dropped a generation that broke; no book since
  int generation_ = 0;              // of the last address book
  ThrottledLog dropped_{"messages dropped or peers turned away"};
};

}  // namespace bps
