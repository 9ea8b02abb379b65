// A worker's side of the protocol: joining the job, proving its rank to every server, declaring tensors to
// the scheduler, pushing and pulling partitions to and from servers. Every request completes exactly once:
// with the reply, with the job's failure, or with a timeout (BYTEPS_TIMEOUT). A reply is taken only from
// the peer the request went to.
//
// The client outlives generations: EndGeneration() (shutdown()) keeps the connections, so that the same
// process may start the next generation (init() again) without joining anew.
//
// In an elastic job every generation has its own address book (this worker's rank, the job's size, a new
// token), which NextGeneration() asks for. A generation that broke (a worker was lost) fails every request
// at once (generation_failure()); the next one forms with the others. A request whose payload is still
// being sent from, or received into, the caller's memory completes only once the transport is done with it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cc/common/clock.h"
#include "cc/common/config.h"
#include "cc/common/logging.h"
#include "cc/common/one_shot.h"
#include "cc/common/shared_arena.h"
#include "cc/common/work_thread.h"
#include "cc/ps/message.h"
#include "cc/transport/transport.h"

namespace bps {

// Which contribution to a key's round a push is: `index` of `count` (worker rank of the worker processes,
// or worker machine id of the machines, for TensorScope::kMachine).
struct Participant {
  int index;
  int count;
};

class WorkerClient : public MessageHandler {
 public:
  using Done = std::function<void(const Status&)>;
  using DeclareDone = std::function<void(const StatusOr<PartitionPlan>&)>;

  WorkerClient(const Config& config, Transport* transport);

  // Joins the job, connects to every server and proves its rank there. Blocks up to BYTEPS_TIMEOUT (a
  // worker that joins a running elastic job: until it is admitted, up to BYTEPS_ELASTIC_TIMEOUT).
  Status Start();
  // Elastic jobs: starts this worker's next generation (after the last one ended or broke) and waits for
  // it to form, up to BYTEPS_ELASTIC_TIMEOUT.
  Status NextGeneration();

  int rank() const { return rank_; }
  int num_workers() const { return num_workers_; }
  int generation() const { return generation_; }
  // Elastic: how many workers wait to join the next generation, as the scheduler last said.
  int workers_waiting() const { return workers_waiting_; }
  // Why this generation broke (elastic), or OK.
  Status generation_failure();
  // Whether a failed job may be joined again by a new client: the job is elastic and this worker lost the
  // scheduler while it was stopped (frozen, and so removed), rather than the job being aborted or the
  // scheduler exiting.
  bool rejoinable();
  // Whether this worker joined a job that was running (it waited for a generation), asked once.
  bool TakeJoinedRunning();
  int num_servers() const { return static_cast<int>(servers_.size()); }
  // Whether every server listens on this worker's own host (a local job).
  bool AllServersOnThisHost() const;
  // The scheduler's choice: partitions cross the network in slices of this size (0: whole).
  size_t slice_bytes() const { return slice_bytes_; }

  // Callbacks run on the transport thread (or inline, on failure).
  void Declare(const TensorSpec& spec, DeclareDone done);
  // Pushes `input` and receives the round's sum into `output` (which may be `input`). A null `input` is a
  // partition of zeros: only the header is sent. `on_sent` runs once `input` has left (its bytes no longer
  // count against the credit window), `done` once the sum is in `output`.
  void PushPull(const Partition& part, uint32_t round, Participant me, DataType dtype, const void* input, void* output,
                std::function<void()> on_sent, Done done);
  // PushPull of an encoded partition (cc/compress/codec.h): `bytes` go out from `encoded` and the encoded sum
  // of as many bytes comes back into `encoded_sum`. Never through shared memory.
  void PushPullEncoded(const Partition& part, uint32_t round, Participant me, const void* encoded, void* encoded_sum,
                       size_t bytes, std::function<void()> on_sent, Done done);
  // A reader of a published tensor: the sum of `round` of the partition (its publisher's value) into
  // `output`, once the publisher pushed it.
  void Fetch(const Partition& part, uint32_t round, DataType dtype, void* output, Done done);

  // The server's residual of a compressed key with error feedback (count floats; checkpoints), read into
  // `residual` or replaced by it. Between this worker's rounds of the key only.
  void SaveResidual(const Partition& part, Participant me, float* residual, Done done);
  void LoadResidual(const Partition& part, Participant me, const float* residual, Done done);

  // Tells the scheduler this worker finished its generation and waits (up to the timeout) for every other
  // worker to finish too. The connections stay: a new generation may follow. With `joined`, the rounds this
  // worker misses meanwhile complete without it (join()). Returns the rank of the worker that finished last.
  StatusOr<int> EndGeneration(bool joined = false);
  // Asks the scheduler to abort the job, naming `why` (an uncaught exception in this worker, say), and
  // fails this client's requests at once.
  void RequestAbort(const std::string& why);

  // The first failure of the job (peer lost, ABORT), or OK. Requests fail fast once it is set.
  Status failure();

  // Fails requests that have waited longer than BYTEPS_TIMEOUT. Called periodically by the engine.
  void FailExpiredRequests();

  void* PayloadDestination(PeerId from, const std::string& header, size_t length) override;
  void OnMessage(PeerId from, const std::string& header, void* payload, size_t length) override;
  void OnPeerLost(PeerId peer, const Status& why) override;

 private:
  struct Pending {
    Done done;
    DeclareDone declare_done;
    // The transport still sends from `source` or receives into `destination`: a failure meanwhile waits in
    // `deferred` until it is done.
    bool sending = false;
    bool receiving = false;
    Status deferred;
    PeerId peer = -1;   // where the reply must come from
    int server = -1;
    uint64_t key = 0;
    const void* source = nullptr;  // the pushed data (null: zeros), for a reply that echoes it
    void* destination = nullptr;
    size_t bytes = 0;
    bool sum = false;  // the reply carries a round's sum (counted in CommunicationCounters)
    double started = 0;
    std::string what;  // for timeout messages
  };

  // The shared memory (cc/common/shared_arena.h) of a server on this worker's host, which this worker maps
  // once the server names it. Guarded by mu_; a view, once set, stays until the client is destroyed.
  struct SharedServer {
    bool unusable = false;  // mapping failed (another PID namespace, permissions): use the transport
    std::unique_ptr<SharedArenaView> view;
  };
  // Where this worker's next push of each key goes in its server's arena, once the server said.
  struct SharedPush {
    ShareMode share = ShareMode::kNone;
    char* destination = nullptr;
  };
  void SendPush(const Partition& part, uint32_t round, Participant me, DataType dtype, const void* input, void* output,
                size_t wire_bytes, bool shareable, std::function<void()> on_sent, Done done);
  void SendResidual(MessageType type, const Partition& part, Participant me, const float* source, float* destination,
                    Done done);
  SharedPush PlanSharedPush(const Partition& part, size_t bytes, bool has_data);
  // Takes what a reply says about shared memory; copies a sum that stayed in the server's arena.
  Status TakeSharedReply(const Pending& p, const Message& reply);

  // Registers a request awaiting its reply and returns its id; once the job (or the generation) has failed,
  // answers it at once and returns 0: it must not be sent.
  uint64_t Track(Pending pending);
  Status RequestFailure();  // the job's failure, or this generation's
  void Fail(const Status& why);
  // Fails every pending request with `why` (those the transport still uses once it is done with them;
  // those of `lost`, whose connection is gone, at once).
  void FailPending(const Status& why, PeerId lost = -1);
  static void Answer(Pending& p, const Status& status);
  // The send of request `id` is done: a failure deferred meanwhile is answered now.
  void Sent(uint64_t id);
  void BreakGeneration(const Status& why);
  void NoteAlive();
  // Whether this process was stopped just now (its stop watch shows a gap).
  bool JustStopped(double now) const;
  // Waits for the next ADDRESS_BOOK (or ABORT) until `seconds` pass; a JOIN_PENDING meanwhile extends the
  // wait to BYTEPS_ELASTIC_TIMEOUT.
  StatusOr<AddressBook> AwaitBook(double seconds);
  // Takes this generation's place from `book`: connects to the servers the first time, then proves the new
  // rank to each of them.
  Status TakeBook(const AddressBook& book);
  void Complete(PeerId from, uint64_t request_id, const Message& reply, void* payload);
  Status Identify();
  void SendOrFail(PeerId to, const Message& m, const void* payload, size_t bytes, uint64_t request_id,
                  std::function<void()> on_sent = nullptr);
  std::string ServerName(int server) const;

  const Config config_;
  Transport* transport_;
  PeerId scheduler_ = -1;
  std::vector<PeerId> servers_;
  std::vector<std::string> server_addresses_;
  std::vector<bool> server_on_this_host_;  // by server rank, set by Start()
  std::atomic<int> rank_{0};
  std::atomic<int> num_workers_{0};
  std::atomic<int> generation_{0};
  std::atomic<int> workers_waiting_{0};
  size_t slice_bytes_ = 0;
  std::deque<Message> books_;  // ADDRESS_BOOK (or ABORT) not taken yet; guarded by mu_, signalled by generation_cv_
  bool join_pending_ = false;  // guarded by mu_
  bool joined_running_ = false;  // guarded by mu_
  std::vector<std::unique_ptr<OneShot<Status>>> identified_;  // by server rank: its answer to IDENTIFY
  std::string token_;  // proves this worker's rank to the servers
  std::condition_variable generation_cv_;  // guarded by mu_
  int generations_done_ = 0;
  int last_to_finish_ = -1;  // of the last generation

  std::mutex mu_;
  std::map<uint64_t, Pending> pending_;
  std::vector<SharedServer> shared_;           // by server rank
  // key -> arena offset of this worker's receive buffer, from the key's last reply; used by one push. A key
  // lives on one server, and this process is its only pusher here (a per-machine key has one per machine).
  std::map<uint64_t, uint64_t> next_receive_;
  uint64_t next_request_ = 1;
  Status failure_;
  Status generation_failure_;  // elastic: this generation broke
  bool aborted_ = false;       // the scheduler aborted the job, or this worker asked it to
  bool lost_scheduler_ = false;
  // This process was stopped (SIGSTOP, a paused machine) when it lost the scheduler: the job removed it, and
  // it may join again. A scheduler that exited is not waited for.
  bool lost_scheduler_while_stopped_ = false;
  std::atomic<double> last_alive_{NowSeconds()};  // when the stop watch last ran (or the client was made)
  std::atomic<double> woke_at_{-1};  // when it last ran after a gap: this process had been stopped
  ThrottledLog dropped_{"messages dropped or peers turned away"};
  // Notes the time every quarter second, so that a gap shows this process was stopped. Declared last: it
  // stops before the members it uses go.
  WorkThread stop_watch_{[this] { NoteAlive(); }, 0.25};
};

}  // namespace bps
