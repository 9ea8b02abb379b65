// A worker's side of the protocol: joining the job, proving its rank to every server, declaring tensors to
// the scheduler, pushing and pulling partitions to and from servers. Every request completes exactly once:
// with the reply, with the job's failure, or with a timeout (BYTEPS_TIMEOUT). A reply is taken only from
// the peer the request went to.
//
// The client outlives generations: EndGeneration() (shutdown()) keeps the connections, so that the same
// process may start the next generation (init() again) without joining anew.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cc/common/config.h"
#include "cc/common/logging.h"
#include "cc/common/one_shot.h"
#include "cc/common/shared_arena.h"
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

  // Joins the job, connects to every server and proves its rank there. Blocks up to BYTEPS_TIMEOUT.
  Status Start();

  int rank() const { return rank_; }
  int num_workers() const { return num_workers_; }
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
    PeerId peer = -1;   // where the reply must come from
    int server = -1;
    uint64_t key = 0;
    const void* source = nullptr;  // the pushed data (null: zeros), for a reply that echoes it
    void* destination = nullptr;
    size_t bytes = 0;
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

  // Registers a request awaiting its reply and returns its id; once the job has failed, answers it at once.
  uint64_t Track(Pending pending);
  void Fail(const Status& why);
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
  int rank_ = 0;
  int num_workers_ = 0;
  size_t slice_bytes_ = 0;
  OneShot<Message> address_book_;
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
  ThrottledLog dropped_{"messages dropped or peers turned away"};
};

}  // namespace bps
