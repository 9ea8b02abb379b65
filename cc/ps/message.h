// The parameter-server protocol: one header layout for every message, a type-specific body.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "cc/common/dtype.h"
#include "cc/common/reduce_op.h"
#include "cc/common/status.h"
#include "cc/compress/compression_spec.h"

namespace bps {

enum class MessageType : uint8_t {
  kRegister = 1,     // node -> scheduler: role, ids, listen address
  kAddressBook,      // scheduler -> node: the job's layout (or an error)
  kDeclare,          // worker -> scheduler: tensor name, dtype, shape
  kDeclareReply,     // scheduler -> worker: key and partition plan (or an error)
  kPush,             // worker -> server: a partition's data for a round; answered by PULL_REPLY
  kPullReply,        // server -> worker: the round's sum once every worker pushed (or an error)
  kFinish,           // worker -> scheduler: this worker is done (text kJoinedMark: it joined, see below)
  kShutdown,         // scheduler -> all: the job is over
  kAbort,            // scheduler -> all: a node failed; stop with the error in `text`
  kServerReady,      // server -> scheduler: address book received, pushes may come
  kIdentify,         // worker -> server, first on its connection: its rank (sender) and token (text)
  kIdentifyReply,    // server -> worker: the connection now speaks for that rank (or an error)
  kKeyPlan,          // scheduler -> server: the keys of a newly planned tensor this server sums (KeyPlanBody)
  kKeyPlanReply,     // server -> scheduler: ready for those keys (or an error)
  kWorkerFinished,   // scheduler -> servers: worker `sender` finished its generation: it pushes nothing more
                     // (text kJoinedMark: it joined, and the rounds it misses complete without it)
  kReset,            // scheduler -> servers: every worker finished: forget every key (a new generation may come)
  kResetReply,       // server -> scheduler
  kGenerationDone,   // scheduler -> workers: every worker finished: shutdown() returns, init() may follow;
                     // `sender` is the worker that finished last
  kAbortRequest,     // worker -> scheduler: this worker failed (why in `text`): abort the job
  kFetch,            // worker -> server: the sum of `round` of a published key, once its publisher pushed it
  // worker -> server, between rounds of a compressed key with error feedback (checkpoints): read the
  // server's residual (cc/ps/key_round.h), answered by a PULL_REPLY carrying it; or replace it with the
  // payload, answered by an empty PULL_REPLY. Addressed like a PUSH (sender: the contribution index).
  kSaveResidual,
  kLoadResidual,
  // Elastic jobs (docs/elastic.md).
  kJoinPending,       // scheduler -> a worker that registered while the job runs: it waits for the next generation
  kWorkersWaiting,    // scheduler -> the generation's workers: `sender` workers wait to join at the next one
  kGenerationBroken,  // scheduler -> the generation's workers: a worker was lost (why in `text`): every request
                      // fails, shutdown() returns at once, init() starts the next generation with the others
  kNextGeneration,    // worker -> scheduler: this worker starts the next generation (init()); answered with its
                      // ADDRESS_BOOK once every worker of the next generation asked
  // Fusion of small partitions (FusedBody): one message carries several PUSHes to one server, their payloads
  // one after another; the server answers them with one PULL_REPLY_MANY once every one is answered.
  kPushMany,          // worker -> server
  kPullReplyMany,     // server -> worker
  kLastType = kPullReplyMany,
};

const char* MessageTypeName(MessageType type);

// A worker that joins (join()) has no more data but lets the others go on: until every worker finished,
// each round it misses completes without it (as zeros in a sum; min, max and product leave it out).
constexpr char kJoinedMark[] = "joined";
// A RESET whose generation broke (a worker was lost): pushes may still be in flight, and parked pulls are
// answered with an error.
constexpr char kDroppedMark[] = "dropped";
// The error (kAborted) a server answers a pull of a round it dropped with, or a push that reaches it after
// its generation broke: the worker learns from it that its generation broke, whichever news comes first.
constexpr char kRoundDropped[] = "the round was dropped: the job's workers changed";

// A worker's use of the shared memory of a server on its host (cc/common/shared_arena.h).
enum class ShareMode : uint8_t {
  kNone = 0,
  kOffer,   // PUSH: "I am on your host": the reply names the arena (text) and this key's receive buffer
  kMapped,  // PUSH: "I have mapped your arena": the reply's sum stays in it (shared_result)
  // PUSH: "the data stays at in_place_input of my heap (cc/common/shareable_heap.h), which you map: write
  // the sum at in_place_output". No payload; the reply says `written`.
  kInPlace,
};

struct Message {
  MessageType type = MessageType::kRegister;
  int32_t sender = -1;       // sender's rank within its role (worker rank, server rank)
  uint64_t request_id = 0;   // echoed in the reply
  uint64_t key = 0;          // partition key
  uint32_t round = 0;        // per-key round counter (push/pull)
  DataType dtype = DataType::kFloat32;
  uint64_t num_elements = 0;
  int32_t participants = 0;  // PUSH: how many pushes complete a round of this key (sender < participants)
  bool zeros = false;        // PUSH: the partition is all zeros and carries no payload; PULL_REPLY: so is the sum
  bool echo = false;         // PULL_REPLY: the sum is the receiver's own push (all others pushed zeros): no payload
  ShareMode share = ShareMode::kNone;  // PUSH
  bool in_shared = false;    // PUSH: the data is already in the sender's receive buffer in the arena: no payload
  static constexpr uint64_t kNoOffset = ~uint64_t(0);
  uint64_t shared_result = kNoOffset;   // PULL_REPLY: the sum is at this arena offset: no payload
  uint64_t shared_receive = kNoOffset;  // PULL_REPLY: where the receiver's next push of this key goes
  uint64_t in_place_input = kNoOffset;   // PUSH with kInPlace: where the pushed data is in the sender's heap
  uint64_t in_place_output = kNoOffset;  // PUSH with kInPlace: where the sum goes in the sender's heap
  bool heap_mapped = false;  // PULL_REPLY to a push naming the sender's heap (text): the server maps it
  bool written = false;      // PULL_REPLY to a kInPlace push: the sum is at its in_place_output
  // PULL_REPLY: microseconds the server held the receiver's push (or fetch) until the round's last
  // contribution arrived: the receiver's wait for the slowest worker.
  uint64_t held_us = 0;
  // PULL_REPLY: the receiver's push came after its round had all the contributions it takes (backup
  // workers): its data was dropped, and the reply carries the round's sum.
  bool late = false;
  // PULL_REPLY with backup workers: the key's newest completed round, so that a late worker knows how far
  // behind it is (0 otherwise).
  uint32_t latest = 0;
  Code code = Code::kOk;     // replies: the outcome
  // Error message, or a type-specific body (PULL_REPLY to kOffer: the arena's locator; PUSH from a worker
  // with a shareable heap to a server on its host: the heap's locator).
  std::string text;

  Status status() const { return code == Code::kOk ? Status::OK() : Status(code, text); }
  void set_status(const Status& s) {
    code = s.code();
    text = s.message();
  }

  // The encoding's bytes besides `text`: what Encode allocates at once (a push in place has its offsets too).
  static constexpr size_t kFixedEncodedBytes = 80;
  static constexpr size_t kInPlaceEncodedBytes = 16;
  std::string Encode() const;
  static StatusOr<Message> Decode(const std::string& bytes);
};

// --- Bodies carried in Message::text ---

struct RegisterBody {
  int32_t role = 0;  // Role
  int32_t worker_id = 0;
  int32_t local_rank = 0;
  int32_t local_size = 1;
  int32_t num_worker = 0;  // the node's DMLC_NUM_WORKER / DMLC_NUM_SERVER, checked against the scheduler's
  int32_t num_server = 0;
  int32_t min_workers = 0;  // BYTEPS_MIN_WORKERS / BYTEPS_MAX_WORKERS (0: not elastic), checked too
  int32_t max_workers = 0;
  std::string address;  // where this node listens
  // Elastic: a member of a running job that lost its scheduler registers again with a scheduler started in
  // its place, saying where it was (0: a process that registers for the first time).
  int32_t last_generation = 0;
  int32_t last_rank = -1;           // its rank in that generation
  int32_t generation_workers = 0;   // how many workers and servers that generation had
  int32_t generation_servers = 0;
  bool rejoins() const { return last_generation > 0; }
  std::string Encode() const;
  static StatusOr<RegisterBody> Decode(const std::string& bytes);
};

struct AddressBook {
  int32_t your_rank = 0;  // rank of the receiver within its role
  int32_t num_workers = 0;  // worker processes in the job (in this generation)
  int32_t generation = 1;   // counts from 1; an elastic job's workers get a book for every generation
  int32_t local_size = 1;
  uint64_t slice_bytes = 0;  // partitions cross the network in slices of this size (0: whole)
  int32_t workers_on_your_host = 0;  // to a server: worker processes that share its host
  std::vector<std::string> servers;  // listen addresses by server rank
  // To a worker: the token that proves its rank to the servers (kIdentify). To a server: every worker's
  // token, by rank. Random per job and worker, made by the scheduler.
  std::string your_token;
  std::vector<std::string> worker_tokens;
  std::string Encode() const;
  static StatusOr<AddressBook> Decode(const std::string& bytes);
};

// Who pushes a tensor: every worker process (of its process set), one process per worker machine (the one
// holding that part of the machine's locally reduced sum, e.g. one GPU's reduce-scatter slice), or one
// worker, the publisher, whose value the others fetch without pushing anything (kPublished: nobody waits
// for a worker that never asks, such as a variable created on one worker only).
enum class TensorScope : uint8_t { kProcess = 0, kMachine = 1, kPublished = 2 };

struct TensorSpec {
  std::string name;
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;
  TensorScope scope = TensorScope::kProcess;
  ReduceOp op = ReduceOp::kSum;
  std::vector<int32_t> members;  // kProcess: the ranks of its process set, ascending; empty: every worker
  int32_t root = 0;              // kPublished: the publisher's rank
  CompressionSpec compression;   // float32 sums only
  // Pushes a round completes without: the job's backup workers (BYTEPS_BACKUP_WORKERS) for a gradient, 0
  // for anything that needs every worker's value. Floating sums over every worker, uncompressed, only.
  int32_t backups = 0;
  uint64_t num_elements() const { return ElementCount(shape); }
  static uint64_t ElementCount(const std::vector<int64_t>& shape);
  std::string ToString() const;  // float32[3,4], "float32[3,4] per machine", "... min over ranks 0,2"
  // Sizes checked before anything is planned or allocated: a name of at most kMaxNameBytes, at most
  // kMaxDims dimensions, none negative, at most kMaxTensorBytes in all.
  static constexpr size_t kMaxNameBytes = 64 << 10;
  static constexpr size_t kMaxDims = 64;
  static constexpr uint64_t kMaxTensorBytes = uint64_t(1) << 40;
  Status Validate() const;
  // What identifies the tensor besides its name, for comparing it with what a request describes without
  // building a spec (Engine::Describes): a field added here must be given there too.
  auto identity() const { return std::tie(dtype, shape, scope, op, members, root, compression, backups); }
  bool operator==(const TensorSpec& o) const { return name == o.name && identity() == o.identity(); }
  std::string Encode() const;
  static StatusOr<TensorSpec> Decode(const std::string& bytes);
};

struct Partition {
  uint64_t key = 0;
  uint64_t offset = 0;  // in elements
  uint64_t count = 0;   // in elements
  int32_t server = 0;
};

struct PartitionPlan {
  std::vector<Partition> partitions;
  std::string Encode() const;
  static StatusOr<PartitionPlan> Decode(const std::string& bytes);
};

// What a server checks every push of a key against.
struct KeySpec {
  uint64_t key = 0;
  DataType dtype = DataType::kFloat32;
  uint64_t count = 0;          // elements
  int32_t participants = 0;    // pushes that complete a round
  TensorScope scope = TensorScope::kProcess;  // whose pushes (see TensorScope)
  ReduceOp op = ReduceOp::kSum;
  std::vector<int32_t> members;  // as TensorSpec's
  int32_t root = 0;              // as TensorSpec's
  CompressionSpec compression;   // as TensorSpec's: pushes and the pulled sum are encoded (cc/compress/codec.h)
  int32_t backups = 0;           // as TensorSpec's: a round completes with participants - backups pushes
};

// A worker's place among the contributors of a key (a contribution index), or why it has none.
constexpr int kReader = -1;    // kPublished, not the publisher: it fetches
constexpr int kOutsider = -2;  // not in the tensor's process set
int ContributionIndex(TensorScope scope, const std::vector<int32_t>& members, int32_t root, int rank,
                      int local_size);
// The worker rank (or machine id, kMachine) behind contribution `index`, for messages.
int ContributorRank(TensorScope scope, const std::vector<int32_t>& members, int32_t root, int index);

// The body of PUSH_MANY and PULL_REPLY_MANY: whole PUSH (or PULL_REPLY) headers, each with the bytes of its
// payload, which follow one another in the message's payload in this order.
struct FusedBody {
  struct Member {
    Message header;
    uint64_t payload_bytes = 0;
  };
  std::vector<Member> members;
  // More members would not make a message cheaper; a bound on what a peer may ask a receiver to parse.
  static constexpr size_t kMaxMembers = 4096;
  // A bound on what a peer may make a receiver allocate for one fused message's payload.
  static constexpr size_t kMaxPayloadBytes = size_t(64) << 20;
  uint64_t payload_bytes() const;
  std::string Encode() const;
  // Checks each member's type (`member_type`) and that the payload sizes add up without overflow.
  static StatusOr<FusedBody> Decode(const std::string& bytes, MessageType member_type);
};

struct KeyPlanBody {
  std::vector<KeySpec> keys;
  std::string Encode() const;
  static StatusOr<KeyPlanBody> Decode(const std::string& bytes);
};

}  // namespace bps
