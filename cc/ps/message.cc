#include "cc/ps/message.h"

#include "cc/common/wire.h"

namespace bps {
namespace {

constexpr uint32_t kMagic = 0x42505331;  // "BPS1": rejects bytes that are not ours

Status Truncated(const char* what) { return InvalidArgument(std::string("malformed ") + what + " message"); }

}  // namespace

const char* MessageTypeName(MessageType type) {
  switch (type) {
    case MessageType::kRegister: return "REGISTER";
    case MessageType::kAddressBook: return "ADDRESS_BOOK";
    case MessageType::kDeclare: return "DECLARE";
    case MessageType::kDeclareReply: return "DECLARE_REPLY";
    case MessageType::kPush: return "PUSH";
    case MessageType::kPullReply: return "PULL_REPLY";
    case MessageType::kFinish: return "FINISH";
    case MessageType::kShutdown: return "SHUTDOWN";
    case MessageType::kAbort: return "ABORT";
    case MessageType::kServerReady: return "SERVER_READY";
    case MessageType::kIdentify: return "IDENTIFY";
    case MessageType::kIdentifyReply: return "IDENTIFY_REPLY";
    case MessageType::kKeyPlan: return "KEY_PLAN";
    case MessageType::kKeyPlanReply: return "KEY_PLAN_REPLY";
    case MessageType::kWorkerFinished: return "WORKER_FINISHED";
    case MessageType::kReset: return "RESET";
    case MessageType::kResetReply: return "RESET_REPLY";
    case MessageType::kGenerationDone: return "GENERATION_DONE";
    case MessageType::kAbortRequest: return "ABORT_REQUEST";
    case MessageType::kFetch: return "FETCH";
    case MessageType::kSaveResidual: return "SAVE_RESIDUAL";
    case MessageType::kLoadResidual: return "LOAD_RESIDUAL";
    case MessageType::kJoinPending: return "JOIN_PENDING";
    case MessageType::kWorkersWaiting: return "WORKERS_WAITING";
    case MessageType::kGenerationBroken: return "GENERATION_BROKEN";
    case MessageType::kNextGeneration: return "NEXT_GENERATION";
    case MessageType::kPushMany: return "PUSH_MANY";
    case MessageType::kPullReplyMany: return "PULL_REPLY_MANY";
  }
  return "UNKNOWN";
}

// in_shared, heap_mapped and written share a byte, and a push in place's offsets follow its share byte only:
// a fused message's members (never in place) keep the size they had, under UCX's bound on a header.
namespace {
constexpr uint8_t kInShared = 1, kHeapMapped = 2, kWritten = 4;
}  // namespace

std::string Message::Encode() const {
  const bool in_place = share == ShareMode::kInPlace;
  WireWriter w(kFixedEncodedBytes + (in_place ? kInPlaceEncodedBytes : 0) + text.size());
  w.Put<uint32_t>(kMagic);
  w.Put<uint8_t>(static_cast<uint8_t>(type));
  w.Put<int32_t>(sender);
  w.Put<uint64_t>(request_id);
  w.Put<uint64_t>(key);
  w.Put<uint32_t>(round);
  w.Put<uint8_t>(static_cast<uint8_t>(dtype));
  w.Put<uint64_t>(num_elements);
  w.Put<int32_t>(participants);
  w.Put<uint8_t>(zeros ? 1 : 0);
  w.Put<uint8_t>(echo ? 1 : 0);
  w.Put<uint8_t>(static_cast<uint8_t>(share));
  if (in_place) {
    w.Put<uint64_t>(in_place_input);
    w.Put<uint64_t>(in_place_output);
  }
  w.Put<uint8_t>((in_shared ? kInShared : 0) | (heap_mapped ? kHeapMapped : 0) | (written ? kWritten : 0));
  w.Put<uint64_t>(shared_result);
  w.Put<uint64_t>(shared_receive);
  w.Put<uint64_t>(held_us);
  w.Put<uint8_t>(late ? 1 : 0);
  w.Put<uint32_t>(latest);
  w.Put<uint8_t>(static_cast<uint8_t>(code));
  w.PutString(text);
  return w.Take();
}

StatusOr<Message> Message::Decode(const std::string& bytes) {
  WireReader r(bytes);
  if (r.Get<uint32_t>() != kMagic) return Truncated("protocol");
  Message m;
  uint8_t type = r.Get<uint8_t>();
  m.sender = r.Get<int32_t>();
  m.request_id = r.Get<uint64_t>();
  m.key = r.Get<uint64_t>();
  m.round = r.Get<uint32_t>();
  uint8_t dtype = r.Get<uint8_t>();
  m.num_elements = r.Get<uint64_t>();
  m.participants = r.Get<int32_t>();
  uint8_t zeros = r.Get<uint8_t>();
  uint8_t echo = r.Get<uint8_t>();
  uint8_t share = r.Get<uint8_t>();
  if (share == static_cast<uint8_t>(ShareMode::kInPlace)) {
    m.in_place_input = r.Get<uint64_t>();
    m.in_place_output = r.Get<uint64_t>();
  }
  uint8_t flags = r.Get<uint8_t>();
  m.shared_result = r.Get<uint64_t>();
  m.shared_receive = r.Get<uint64_t>();
  m.held_us = r.Get<uint64_t>();
  uint8_t late = r.Get<uint8_t>();
  m.latest = r.Get<uint32_t>();
  uint8_t code = r.Get<uint8_t>();
  m.text = r.GetString();
  if (r.failed() || type < 1 || type > static_cast<uint8_t>(MessageType::kLastType) || !IsValidDataType(dtype) ||
      code > static_cast<uint8_t>(Code::kLastCode) || zeros > 1 || echo > 1 ||
      share > static_cast<uint8_t>(ShareMode::kInPlace) || flags > (kInShared | kHeapMapped | kWritten) ||
      late > 1) {
    return Truncated("protocol");
  }
  m.type = static_cast<MessageType>(type);
  m.dtype = static_cast<DataType>(dtype);
  m.code = static_cast<Code>(code);
  m.zeros = zeros == 1;
  m.echo = echo == 1;
  m.share = static_cast<ShareMode>(share);
  m.in_shared = (flags & kInShared) != 0;
  m.late = late == 1;
  m.heap_mapped = (flags & kHeapMapped) != 0;
  m.written = (flags & kWritten) != 0;
  return m;
}

std::string RegisterBody::Encode() const {
  WireWriter w;
  w.Put(role);
  w.Put(worker_id);
  w.Put(local_rank);
  w.Put(local_size);
  w.Put(num_worker);
  w.Put(num_server);
  w.Put(min_workers);
  w.Put(max_workers);
  w.PutString(address);
  w.Put(last_generation);
  w.Put(last_rank);
  w.Put(generation_workers);
  w.Put(generation_servers);
  return w.Take();
}

StatusOr<RegisterBody> RegisterBody::Decode(const std::string& bytes) {
  WireReader r(bytes);
  RegisterBody b;
  b.role = r.Get<int32_t>();
  b.worker_id = r.Get<int32_t>();
  b.local_rank = r.Get<int32_t>();
  b.local_size = r.Get<int32_t>();
  b.num_worker = r.Get<int32_t>();
  b.num_server = r.Get<int32_t>();
  b.min_workers = r.Get<int32_t>();
  b.max_workers = r.Get<int32_t>();
  b.address = r.GetString();
  b.last_generation = r.Get<int32_t>();
  b.last_rank = r.Get<int32_t>();
  b.generation_workers = r.Get<int32_t>();
  b.generation_servers = r.Get<int32_t>();
  if (r.failed()) return Truncated("REGISTER");
  return b;
}

std::string AddressBook::Encode() const {
  WireWriter w;
  w.Put(your_rank);
  w.Put(num_workers);
  w.Put(generation);
  w.Put(local_size);
  w.Put(slice_bytes);
  w.Put(workers_on_your_host);
  w.Put<uint32_t>(static_cast<uint32_t>(servers.size()));
  for (const auto& s : servers) w.PutString(s);
  w.PutString(your_token);
  w.Put<uint32_t>(static_cast<uint32_t>(worker_tokens.size()));
  for (const auto& t : worker_tokens) w.PutString(t);
  return w.Take();
}

StatusOr<AddressBook> AddressBook::Decode(const std::string& bytes) {
  WireReader r(bytes);
  AddressBook b;
  b.your_rank = r.Get<int32_t>();
  b.num_workers = r.Get<int32_t>();
  b.generation = r.Get<int32_t>();
  b.local_size = r.Get<int32_t>();
  b.slice_bytes = r.Get<uint64_t>();
  b.workers_on_your_host = r.Get<int32_t>();
  uint32_t n = r.Get<uint32_t>();
  for (uint32_t i = 0; i < n && !r.failed(); ++i) b.servers.push_back(r.GetString());
  b.your_token = r.GetString();
  n = r.Get<uint32_t>();
  for (uint32_t i = 0; i < n && !r.failed(); ++i) b.worker_tokens.push_back(r.GetString());
  if (r.failed()) return Truncated("ADDRESS_BOOK");
  return b;
}

uint64_t TensorSpec::ElementCount(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

Status TensorSpec::Validate() const {
  if (name.empty() || name.size() > kMaxNameBytes) {
    return InvalidArgument("a tensor name must have 1 to " + std::to_string(kMaxNameBytes) + " bytes");
  }
  if (shape.size() > kMaxDims) {
    return InvalidArgument("tensor '" + name + "' has " + std::to_string(shape.size()) + " dimensions; at most " +
                           std::to_string(kMaxDims) + " are supported");
  }
  uint64_t elements = 1;
  const uint64_t limit = kMaxTensorBytes / DataTypeSize(dtype);
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument("tensor '" + name + "' has a negative dimension");
    if (d > 0 && elements > limit / static_cast<uint64_t>(d)) elements = limit + 1;
    else elements *= static_cast<uint64_t>(d);
  }
  if (elements > limit) {
    return InvalidArgument("tensor '" + name + "' has more than " + std::to_string(kMaxTensorBytes) +
                           " bytes: split it");
  }
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] < 0 || (i > 0 && members[i] <= members[i - 1])) {
      return InvalidArgument("tensor '" + name + "': a process set lists distinct ranks in ascending order");
    }
  }
  if (!members.empty() && scope != TensorScope::kProcess) {
    return InvalidArgument("tensor '" + name + "': process sets apply to tensors every member pushes");
  }
  if (compression.on()) {
    BPS_RETURN_IF_ERROR(compression.Validate());
    if (dtype != DataType::kFloat32 || op != ReduceOp::kSum || scope == TensorScope::kPublished) {
      return InvalidArgument("tensor '" + name + "' (" + ToString() + "): compression applies to float32 sums only; "
                             "push_pull it without compression");
    }
  }
  if (op == ReduceOp::kWeights && (scope != TensorScope::kProcess || !members.empty())) {
    return InvalidArgument("tensor '" + name + "': weights kept by the servers (asynchronous training) are pushed "
                           "by every worker process, without process sets");
  }
  if (backups < 0) return InvalidArgument("tensor '" + name + "': a negative number of backup workers");
  if (backups > 0 && compression.on()) {
    return InvalidArgument("tensor '" + name + "': compression (" + compression.ToString() + ") is not offered with "
                           "backup workers (BYTEPS_BACKUP_WORKERS): push_pull it without compression, or unset "
                           "BYTEPS_BACKUP_WORKERS");
  }
  if (backups > 0 &&
      (scope != TensorScope::kProcess || !members.empty() || op != ReduceOp::kSum || !IsFloatingPoint(dtype))) {
    return InvalidArgument("tensor '" + name + "' (" + ToString() + "): backup workers (BYTEPS_BACKUP_WORKERS) apply "
                           "to floating sums over every worker process only (the sum is scaled to stand for every "
                           "worker; DistributedOptimizer, DistributedGradientTape and BytePSStrategy push gradients "
                           "so): push_pull it without backups=True, or unset BYTEPS_BACKUP_WORKERS");
  }
  if (scope == TensorScope::kPublished && (op != ReduceOp::kSum || root < 0)) {
    return InvalidArgument("tensor '" + name + "': a published tensor has one publisher and no reduction");
  }
  return Status::OK();
}

std::string TensorSpec::ToString() const {
  std::string s = std::string(DataTypeName(dtype)) + "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  s += "]";
  if (scope == TensorScope::kMachine) s += " per machine";
  if (scope == TensorScope::kPublished) s += " published by worker " + std::to_string(root);
  if (op != ReduceOp::kSum) s += std::string(" ") + ReduceOpName(op);
  if (!members.empty()) {
    s += " over ranks ";
    for (size_t i = 0; i < members.size(); ++i) s += (i ? "," : "") + std::to_string(members[i]);
  }
  if (compression.on()) s += " compressed " + compression.ToString();
  if (backups > 0) s += " with " + std::to_string(backups) + " backup worker(s)";
  return s;
}

int ContributionIndex(TensorScope scope, const std::vector<int32_t>& members, int32_t root, int rank,
                      int local_size) {
  switch (scope) {
    case TensorScope::kMachine: return rank / local_size;
    case TensorScope::kPublished: return rank == root ? 0 : kReader;
    case TensorScope::kProcess: break;
  }
  if (members.empty()) return rank;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] == rank) return static_cast<int>(i);
  }
  return kOutsider;
}

int ContributorRank(TensorScope scope, const std::vector<int32_t>& members, int32_t root, int index) {
  if (scope == TensorScope::kPublished) return root;
  if (scope == TensorScope::kProcess && !members.empty() && index >= 0 && index < static_cast<int>(members.size())) {
    return members[index];
  }
  return index;
}

namespace {

void PutCompression(WireWriter& w, const CompressionSpec& c) {
  w.Put<uint8_t>(static_cast<uint8_t>(c.kind));
  w.Put(c.ratio);
  w.Put(c.momentum);
  w.Put<uint8_t>(c.error_feedback ? 1 : 0);
}

// A compression that fails its own checks reads as a failed read.
CompressionSpec GetCompression(WireReader& r, bool* valid) {
  CompressionSpec c;
  c.kind = static_cast<CodecKind>(r.Get<uint8_t>());
  c.ratio = r.Get<float>();
  c.momentum = r.Get<float>();
  const uint8_t feedback = r.Get<uint8_t>();
  c.error_feedback = feedback == 1;
  *valid = feedback <= 1 && c.Validate().ok();
  return c;
}

}  // namespace

std::string TensorSpec::Encode() const {
  WireWriter w;
  w.PutString(name);
  w.Put<uint8_t>(static_cast<uint8_t>(dtype));
  w.Put<uint32_t>(static_cast<uint32_t>(shape.size()));
  for (int64_t d : shape) w.Put(d);
  w.Put<uint8_t>(static_cast<uint8_t>(scope));
  w.Put<uint8_t>(static_cast<uint8_t>(op));
  w.Put<uint32_t>(static_cast<uint32_t>(members.size()));
  for (int32_t m : members) w.Put(m);
  w.Put(root);
  PutCompression(w, compression);
  w.Put(backups);
  return w.Take();
}

StatusOr<TensorSpec> TensorSpec::Decode(const std::string& bytes) {
  WireReader r(bytes);
  TensorSpec t;
  t.name = r.GetString();
  uint8_t dtype = r.Get<uint8_t>();
  uint32_t rank = r.Get<uint32_t>();
  for (uint32_t i = 0; i < rank && !r.failed(); ++i) t.shape.push_back(r.Get<int64_t>());
  uint8_t scope = r.Get<uint8_t>();
  uint8_t op = r.Get<uint8_t>();
  uint32_t members = r.Get<uint32_t>();
  for (uint32_t i = 0; i < members && !r.failed(); ++i) t.members.push_back(r.Get<int32_t>());
  t.root = r.Get<int32_t>();
  bool valid_compression = false;
  t.compression = GetCompression(r, &valid_compression);
  t.backups = r.Get<int32_t>();
  if (r.failed() || !valid_compression || !IsValidDataType(dtype) || scope > static_cast<uint8_t>(TensorScope::kPublished) ||
      !IsValidReduceOp(op)) {
    return Truncated("DECLARE");
  }
  t.dtype = static_cast<DataType>(dtype);
  t.scope = static_cast<TensorScope>(scope);
  t.op = static_cast<ReduceOp>(op);
  return t;
}

std::string PartitionPlan::Encode() const {
  WireWriter w;
  w.Put<uint32_t>(static_cast<uint32_t>(partitions.size()));
  for (const Partition& p : partitions) {
    w.Put(p.key);
    w.Put(p.offset);
    w.Put(p.count);
    w.Put(p.server);
  }
  return w.Take();
}

StatusOr<PartitionPlan> PartitionPlan::Decode(const std::string& bytes) {
  WireReader r(bytes);
  PartitionPlan plan;
  uint32_t n = r.Get<uint32_t>();
  for (uint32_t i = 0; i < n && !r.failed(); ++i) {
    Partition p;
    p.key = r.Get<uint64_t>();
    p.offset = r.Get<uint64_t>();
    p.count = r.Get<uint64_t>();
    p.server = r.Get<int32_t>();
    plan.partitions.push_back(p);
  }
  if (r.failed()) return Truncated("DECLARE_REPLY");
  return plan;
}

uint64_t FusedBody::payload_bytes() const {
  uint64_t total = 0;
  for (const Member& m : members) total += m.payload_bytes;
  return total;
}

std::string FusedBody::Encode() const {
  WireWriter w;
  w.Put<uint32_t>(static_cast<uint32_t>(members.size()));
  for (const Member& m : members) {
    w.PutString(m.header.Encode());
    w.Put(m.payload_bytes);
  }
  return w.Take();
}

StatusOr<FusedBody> FusedBody::Decode(const std::string& bytes, MessageType member_type) {
  WireReader r(bytes);
  FusedBody body;
  const uint32_t n = r.Get<uint32_t>();
  if (r.failed() || n == 0 || n > kMaxMembers) return Truncated(MessageTypeName(member_type));
  uint64_t total = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const std::string header = r.GetString();
    const uint64_t payload = r.Get<uint64_t>();
    if (r.failed() || payload > TensorSpec::kMaxTensorBytes || total + payload > TensorSpec::kMaxTensorBytes) {
      return Truncated(MessageTypeName(member_type));
    }
    auto decoded = Message::Decode(header);
    if (!decoded.ok() || decoded.value().type != member_type) return Truncated(MessageTypeName(member_type));
    total += payload;
    body.members.push_back(Member{std::move(decoded.value()), payload});
  }
  return body;
}

std::string KeyPlanBody::Encode() const {
  WireWriter w;
  w.Put<uint32_t>(static_cast<uint32_t>(keys.size()));
  for (const KeySpec& k : keys) {
    w.Put(k.key);
    w.Put<uint8_t>(static_cast<uint8_t>(k.dtype));
    w.Put(k.count);
    w.Put(k.participants);
    w.Put<uint8_t>(static_cast<uint8_t>(k.scope));
    w.Put<uint8_t>(static_cast<uint8_t>(k.op));
    w.Put<uint32_t>(static_cast<uint32_t>(k.members.size()));
    for (int32_t m : k.members) w.Put(m);
    w.Put(k.root);
    PutCompression(w, k.compression);
    w.Put(k.backups);
  }
  return w.Take();
}

StatusOr<KeyPlanBody> KeyPlanBody::Decode(const std::string& bytes) {
  WireReader r(bytes);
  KeyPlanBody body;
  uint32_t n = r.Get<uint32_t>();
  for (uint32_t i = 0; i < n && !r.failed(); ++i) {
    KeySpec k;
    k.key = r.Get<uint64_t>();
    uint8_t dtype = r.Get<uint8_t>();
    k.count = r.Get<uint64_t>();
    k.participants = r.Get<int32_t>();
    uint8_t scope = r.Get<uint8_t>();
    uint8_t op = r.Get<uint8_t>();
    uint32_t members = r.Get<uint32_t>();
    for (uint32_t m = 0; m < members && !r.failed(); ++m) k.members.push_back(r.Get<int32_t>());
    k.root = r.Get<int32_t>();
    bool valid_compression = false;
    k.compression = GetCompression(r, &valid_compression);
    k.backups = r.Get<int32_t>();
    if (!valid_compression || !IsValidDataType(dtype) || scope > static_cast<uint8_t>(TensorScope::kPublished) || !IsValidReduceOp(op)) {
      return Truncated("KEY_PLAN");
    }
    k.dtype = static_cast<DataType>(dtype);
    k.scope = static_cast<TensorScope>(scope);
    k.op = static_cast<ReduceOp>(op);
    body.keys.push_back(k);
  }
  if (r.failed()) return Truncated("KEY_PLAN");
  return body;
}

}  // namespace bps
