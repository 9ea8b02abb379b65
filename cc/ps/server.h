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
//
// An elastic job's server that loses the scheduler (not because this process was stopped) drops the
// unfinished rounds, as for a generation that broke, and registers again with a scheduler started at the same
// address, saying where it was; the job fails if none comes within BYTEPS_ELASTIC_TIMEOUT.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "cc/common/chunk_helpers.h"
#include "cc/common/config.h"
#include "cc/common/logging.h"
#include "cc/common/one_shot.h"
#include "cc/common/shared_arena.h"
#include "cc/common/stopped_process_watch.h"
#include "cc/common/work_thread.h"
#include "cc/ps/async_store.h"
#include "cc/ps/fused_inboxes.h"
#include "cc/ps/key_round.h"
#include "cc/ps/message.h"
#include "cc/ps/round_settler.h"
#include "cc/ps/server_generation.h"
#include "cc/ps/worker_heaps.h"
#include "cc/transport/transport.h"

namespace bps {

class Server : public MessageHandler {
 public:
  Server(const Config& config, Transport* transport);
  ~Server() override;

  // Registers with the scheduler and serves until the job ends: OK on SHUTDOWN, the error on ABORT or
  // when the scheduler is lost (elastic: and none comes back).
  Status Run();
  // Makes Run() return `why` (used when the process is told to stop).
  void Stop(const Status& why) { Finish(why); }

  void* PayloadDestination(PeerId from, const std::string& header, size_t length) override;
  void OnMessage(PeerId from, const std::string& header, void* payload, size_t length) override;
  void OnPeerLost(PeerId peer, const Status& why) override;

 private:

  void OnSchedulerMessage(const Message& m);
  void OnAddressBook(const Message& m);
  void HandleIdentify(PeerId from, const Message& m);
  void HandleKeyPlan(const Message& m);
  void HandleWorkerFinished(int rank, bool joined);
  void HandleReset(bool dropped);
  // A key's entry is shared with the tasks, the payloads being received and the replies being sent that use
  // it, so that a generation's end (a peer that lies may push after it) never frees what they still touch.
  using KeyEntries = std::map<uint64_t, std::shared_ptr<ServerKey>>;
  // Dropped keys whose buffers `holders` may still use; dropped from here once none does (see above).
  struct Retired {
    KeyEntries keys;
    std::set<PeerId> holders;
  };
  // `peer` identified again or is gone: it holds no dropped keys any more. With keys_mu_ held.
  void ReleaseRetired(PeerId peer);
  void CreateSharedArena();
  // The key a push (or, `fetch`, a fetch) from `from` goes to, checked against its plan and the connection's
  // rank. nullptr with `error` OK: the connection is no identified worker (no answer is due). `received`
  // (unless null) takes the key whose buffer the message's payload went to (PayloadDestination), or null.
  std::shared_ptr<ServerKey> CheckedKey(PeerId from, const Message& m, Status* error, bool fetch = false,
                                        std::shared_ptr<ServerKey>* received = nullptr);
  WorkThread& SumThreadFor(uint64_t key) { return *sum_threads_[key % sum_threads_.size()]; }
  void HandlePush(PeerId from, const Message& m, void* payload);
  // PUSH_MANY: each member as a PUSH, its payload copied out of the message's into its key's buffer; the
  // answers leave together (FusedReply).
  void HandlePushMany(PeerId from, const Message& m, void* payload);
  // Where a PUSH_MANY's payload of `length` bytes lands until HandlePushMany takes it.
  void* FusedInbox(PeerId from, const Message& m, size_t length);
  // A reader of a published key: answered with round m.round once the publisher pushed it.
  void HandleFetch(PeerId from, const Message& m);
  // SAVE_RESIDUAL / LOAD_RESIDUAL of a compressed key (checkpoints of its error feedback).
  void HandleResidual(PeerId from, const Message& m, void* payload);
  // Where a push in place (ShareMode::kInPlace) is read from and its sum goes, in the pusher's heap
  // (`heap`, null where it cannot be mapped): set in `*input` and `pull`, or the error.
  Status PlaceInHeap(const Message& m, const ServerKey& entry, std::shared_ptr<const SharedArenaView> heap,
                     const void** input, ParkedPull* pull);
  // `in_place_input`: a push in place's data (pull.output is then set).
  void SumPush(uint64_t key, ServerKey* entry, int rank, bool zeros, const ParkedPull& pull,
               const void* in_place_input = nullptr);
  // Asynchronous training (a key of ReduceOp::kWeights): a push is a change of the weights (or their initial
  // value) that async_ applies; its reply carries the weights.
  void AsyncPush(ServerKey* entry, const ParkedPull& pull, bool zeros);
  void SendAsyncReplies(const std::vector<AsyncReply>& replies);
  void CheckStaleRounds(size_t thread_index);
  void Finish(const Status& result);
  // Elastic: registers with the scheduler started in the lost one's place; the job's end if none comes.
  void RejoinScheduler();
  // See ServerGeneration; these take keys_mu_.
  std::set<int> FinishedContributors(const KeySpec& spec);
  std::set<int> JoinedContributors(const KeySpec& spec);

  static constexpr double kAbortLingerSeconds = 0.5;
  // Address space reserved for keys shared with workers on this host; memory is used only as written.
  static constexpr size_t kSharedArenaBytes = size_t(256) << 30;

  const Config config_;
  Transport* transport_;
  ChunkHelpers sum_helpers_;  // lend idle cores to one large sum: the summing threads less one
  std::vector<std::unique_ptr<WorkThread>> sum_threads_;

  std::atomic<PeerId> scheduler_{-1};
  std::string listening_;  // where workers reach this server
  std::atomic<bool> scheduler_gone_{false};  // elastic: lost; Run() registers again
  // Elastic: when this server registered again with a new scheduler whose book has not come yet (or -1).
  std::atomic<double> registered_again_at_{-1};
  // From the last address book: where this server was in the job (for REGISTER after a lost scheduler).
  std::atomic<int> book_rank_{-1};
  std::atomic<int> book_generation_{0};
  std::atomic<int> book_workers_{0};
  std::atomic<int> book_servers_{0};
  OneShot<Message> address_book_;
  std::atomic<bool> join_pending_{false};  // registered while an elastic job ran: taken at its next generation
  StoppedProcessWatch stop_watch_{config_.timeout_s};  // tells a server woken from SIGSTOP why it was dropped
  OneShot<Status> finished_;
  std::atomic<uint64_t> late_pushes_{0};  // backup workers: pushes dropped as late, this generation
  // Null without workers on this host; made by the first book. Shared with the keys whose buffers are in it.
  std::shared_ptr<SharedArena> arena_;

  // Guards what follows; a ServerKey's round is used by its summing thread's tasks once created.
  std::mutex keys_mu_;
  ServerGeneration generation_;  // the workers, set by each address book before any of them can connect
  KeyEntries keys_;
  // Payloads in flight, by connection (a transport may receive several of one connection at once): the key
  // whose buffer each lands in, kept until its message is handled (or the connection lost).
  struct Receiving {
    uint64_t key;
    uint64_t request_id;
    std::shared_ptr<ServerKey> entry;
  };
  std::unordered_map<PeerId, std::vector<Receiving>> receiving_;
  FusedInboxes fused_inboxes_;  // PUSH_MANY payloads being received
  WorkerHeaps worker_heaps_;    // of the workers on this host that push in place
  std::vector<Retired> retired_;
  RoundSettler settler_;
  ThrottledLog dropped_{"messages dropped or peers turned away"};
  std::unique_ptr<AsyncStore> async_;  // keys of ReduceOp::kWeights (asynchronous training)
};

}  // namespace bps
