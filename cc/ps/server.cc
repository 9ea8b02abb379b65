#include "cc/ps/server.h"

#include <chrono>
#include <cstring>
#include <future>
#include <new>
#include <thread>

#include "cc/common/clock.h"
#include "cc/common/logging.h"
#include "cc/compress/codec.h"
#include "cc/ps/node_setup.h"
#include "cc/ps/timeouts.h"

namespace bps {

// Pushes of up to this many bytes are summed on the transport's thread when they can be (HandlePush).
constexpr size_t kSumHereBytes = 64 << 10;

Server::Server(const Config& config, Transport* transport)
    : config_(config),
      transport_(transport),
      sum_helpers_(config.server_sum_threads - 1),
      settler_(config_, transport,
               {[this](const KeySpec& spec) { return FinishedContributors(spec); },
                [this](const KeySpec& spec) { return JoinedContributors(spec); }},
               [this] { return arena_->locator(); }) {
  for (int i = 0; i < config.server_sum_threads; ++i) {
    sum_threads_.push_back(std::make_unique<WorkThread>([this, i] { CheckStaleRounds(i); }));
  }
  async_ = std::make_unique<AsyncStore>(config.staleness, MissingWorkerTimeout(config));
}

Server::~Server() {
  for (auto& thread : sum_threads_) thread->Stop();
}

Status Server::Run() {
  transport_->SetHandler(this);
  BPS_RETURN_IF_ERROR(JoinJob(config_, transport_, &scheduler_, &listening_));
  auto book = address_book_.Wait(config_.timeout_s);
  // A server that registered while an elastic job runs waits for its workers to end a generation.
  if (!book && join_pending_) book = address_book_.Wait(config_.elastic_timeout_s);
  if (!book && join_pending_) {
    return DeadlineExceeded("this server was not taken into the running job within BYTEPS_ELASTIC_TIMEOUT: its "
                            "workers did not end a generation (bps_tf.elastic's state.commit() does, where a "
                            "server waits)");
  }
  if (!book) return DeadlineExceeded("the scheduler did not start the job within BYTEPS_TIMEOUT");
  if (!book->status().ok()) return book->status();
  if (book->type == MessageType::kShutdown) return Status::OK();  // the job ended before it took this server
  auto decoded = AddressBook::Decode(book->text);
  if (!decoded.ok()) return decoded.status();
  BPS_LOG(Info) << "server " << decoded.value().your_rank << " serving " << decoded.value().num_workers
                << " workers";
  // The job ends by SHUTDOWN or ABORT from the scheduler, or when the scheduler is lost (its connection
  // breaks, or it stays silent for BYTEPS_TIMEOUT) and, elastic, none comes back; each of those sets
  // `finished_`.
  while (true) {
    auto result = finished_.Wait(0.2);
    if (!result) {
      if (scheduler_gone_) RejoinScheduler();
      const double since = registered_again_at_;
      // The new scheduler forms the job within BYTEPS_TIMEOUT, or fails it (its connection may also break
      // before this server knew it was the scheduler's).
      if (since >= 0 && NowSeconds() - since > config_.timeout_s + config_.elastic_timeout_s) {
        Finish(DeadlineExceeded("registered again with the scheduler at " + config_.root_uri + ":" +
                                std::to_string(config_.root_port) + ", which did not take this server into a "
                                "generation within BYTEPS_TIMEOUT + BYTEPS_ELASTIC_TIMEOUT"));
      }
      continue;
    }
    if (!result->ok()) {
      // The scheduler sends ABORT to every node at once; leaving at once would let workers see this server's
      // connection drop before the scheduler's message, and report a lost server instead of the root cause.
      std::this_thread::sleep_for(std::chrono::duration<double>(kAbortLingerSeconds));
    }
    return *result;
  }
}

void Server::Finish(const Status& result) { finished_.Set(result); }

void Server::RejoinScheduler() {
  scheduler_gone_ = false;
  Rejoin where;
  where.generation = book_generation_;
  where.rank = book_rank_;
  where.workers = book_workers_;
  where.servers = book_servers_;
  BPS_LOG(Warning) << "registering again with the scheduler at " << config_.root_uri << ":" << config_.root_port;
  Status joined = RejoinJob(config_, transport_, listening_, where, NowSeconds() + config_.elastic_timeout_s,
                            [this] { return finished_.Wait(0).has_value(); }, &scheduler_);
  if (!joined.ok()) return Finish(joined);
  registered_again_at_ = NowSeconds();
}

void Server::CreateSharedArena() {
  auto arena = SharedArena::Create(kSharedArenaBytes);
  if (!arena.ok()) {
    BPS_LOG(Warning) << "workers on this host will use the transport: no shared memory ("
                     << arena.status().message() << ")";
    return;
  }
  arena_ = std::move(arena.value());
}

void Server::OnMessage(PeerId from, const std::string& header, void* payload, size_t) {
  auto decoded = Message::Decode(header);
  if (!decoded.ok()) {
    dropped_.Warn("server dropped a malformed message from " + transport_->PeerName(from));
    return;
  }
  const Message& m = decoded.value();
  if (from == scheduler_) return OnSchedulerMessage(m);
  switch (m.type) {
    case MessageType::kIdentify: return HandleIdentify(from, m);
    case MessageType::kPush: return HandlePush(from, m, payload);
    case MessageType::kPushMany: return HandlePushMany(from, m, payload);
    case MessageType::kFetch: return HandleFetch(from, m);
    case MessageType::kSaveResidual:
    case MessageType::kLoadResidual: return HandleResidual(from, m, payload);
    default:
      dropped_.Warn(std::string("server dropped ") + MessageTypeName(m.type) + " from " + transport_->PeerName(from) +
                    ": only the scheduler sends it");
  }
}

void Server::OnSchedulerMessage(const Message& m) {
  switch (m.type) {
    case MessageType::kAddressBook: return OnAddressBook(m);
    case MessageType::kKeyPlan: return HandleKeyPlan(m);
    case MessageType::kWorkerFinished: return HandleWorkerFinished(m.sender, m.text == kJoinedMark);
    case MessageType::kReset: return HandleReset(m.text == kDroppedMark);
    case MessageType::kJoinPending:
      BPS_LOG(Info) << "waiting to join the running job at its next generation";
      join_pending_ = true;
      return;
    case MessageType::kShutdown:
      address_book_.Set(m);  // a server still waiting to join leaves too
      return Finish(Status::OK());
    case MessageType::kAbort:
      address_book_.Set(m);
      return Finish(m.status());
    default:
      BPS_LOG(Warning) << "server ignored " << MessageTypeName(m.type) << " from the scheduler";
  }
}

void Server::OnAddressBook(const Message& m) {
  auto book = AddressBook::Decode(m.text);
  if (book.ok() && m.status().ok()) {
    registered_again_at_ = -1;
    book_rank_ = book.value().your_rank;
    book_generation_ = book.value().generation;
    book_workers_ = book.value().num_workers;
    book_servers_ = static_cast<int>(book.value().servers.size());
    bool first = false;
    {
      std::lock_guard<std::mutex> lock(keys_mu_);
      first = generation_.Start(book.value());
    }
    if (first && config_.shared_memory && book.value().workers_on_your_host > 0) CreateSharedArena();
    Message ready;
    ready.type = MessageType::kServerReady;
    transport_->Send(scheduler_, ready.Encode(), nullptr, 0, nullptr);
  }
  address_book_.Set(m);
}

// A worker's connection speaks for the rank whose token it shows, and for no other.
void Server::HandleIdentify(PeerId from, const Message& m) {
  Status result;
  {
    std::lock_guard<std::mutex> lock(keys_mu_);
    result = generation_.Identify(from, m.sender, m.text);
    ReleaseRetired(from);
  }
  if (!result.ok()) dropped_.Warn("turned away " + transport_->PeerName(from) + ": " + result.message());
  Message reply;
  reply.type = MessageType::kIdentifyReply;
  reply.request_id = m.request_id;
  reply.set_status(result);
  transport_->Send(from, reply.Encode(), nullptr, 0, nullptr);
}

void Server::HandleKeyPlan(const Message& m) {
  auto body = KeyPlanBody::Decode(m.text);
  Status result = body.status();
  if (body.ok()) {
    std::lock_guard<std::mutex> lock(keys_mu_);
    const int num_workers = generation_.num_workers();
    for (const KeySpec& spec : body.value().keys) {
      const uint64_t limit = TensorSpec::kMaxTensorBytes / DataTypeSize(spec.dtype);
      const bool members_fit = spec.members.empty() || (spec.members.back() < num_workers &&
                                                        static_cast<int>(spec.members.size()) == spec.participants);
      const bool compression_fits = !spec.compression.on() || (spec.dtype == DataType::kFloat32 &&
                                                               spec.op == ReduceOp::kSum &&
                                                               spec.scope != TensorScope::kPublished &&
                                                               spec.count <= kMaxCodecElements);
      const bool backups_fit = spec.backups == 0 || (spec.backups > 0 && spec.backups < spec.participants &&
                                                     !spec.compression.on() && spec.op == ReduceOp::kSum &&
                                                     spec.scope == TensorScope::kProcess && spec.members.empty() &&
                                                     IsFloatingPoint(spec.dtype));
      if (!compression_fits || !backups_fit || spec.count > limit || spec.participants < 1 || spec.participants > num_workers || !members_fit ||
          spec.root < 0 || spec.root >= num_workers) {
        result = InvalidArgument("a key plan out of this job's bounds");
        break;
      }
      if (spec.op == ReduceOp::kWeights && !config_.async) {
        result = InvalidArgument("a worker trains asynchronously, but this server was started without "
                                 "BYTEPS_ENABLE_ASYNC or BYTEPS_STALENESS: set them alike on every process "
                                 "(bpslaunch --async / --staleness does)");
        break;
      }
      auto it = keys_.find(spec.key);
      if (it == keys_.end()) {
        auto entry = std::make_shared<ServerKey>();
        entry->spec = spec;
        keys_.emplace(spec.key, std::move(entry));
      } else if (const KeySpec& planned = it->second->spec;
                 planned.dtype != spec.dtype || planned.count != spec.count ||
                 planned.participants != spec.participants || planned.scope != spec.scope ||
                 planned.op != spec.op || planned.members != spec.members || planned.root != spec.root ||
                 planned.compression != spec.compression || planned.backups != spec.backups) {
        result = InvalidArgument("key " + std::to_string(spec.key) + " is planned twice, differently");
        break;
      }
    }
  }
  Message reply;
  reply.type = MessageType::kKeyPlanReply;
  reply.request_id = m.request_id;
  reply.set_status(result);
  transport_->Send(scheduler_, reply.Encode(), nullptr, 0, nullptr);
}

std::set<int> Server::FinishedContributors(const KeySpec& spec) {
  std::lock_guard<std::mutex> lock(keys_mu_);
  return generation_.FinishedContributors(spec);
}

std::set<int> Server::JoinedContributors(const KeySpec& spec) {
  std::lock_guard<std::mutex> lock(keys_mu_);
  return generation_.JoinedContributors(spec);
}

void Server::HandleWorkerFinished(int rank, bool joined) {
  std::vector<std::pair<uint64_t, std::shared_ptr<ServerKey>>> keys;
  {
    std::lock_guard<std::mutex> lock(keys_mu_);
    generation_.WorkerFinished(rank, joined);
    keys.assign(keys_.begin(), keys_.end());
  }
  for (auto& key : keys) {
    if (key.second->spec.op == ReduceOp::kWeights) {
      SendAsyncReplies(async_->Finished(key.second->spec, FinishedContributors(key.second->spec)));
      continue;
    }
    SumThreadFor(key.first).Post([this, key] {
      if (!key.second->retired) settler_.Settle(key.first, key.second.get());
    });
  }
}

// Every worker finished (no push is in flight), or the generation broke (`dropped`): the waiting pulls are
// answered with an error and the keys are retired. The summing threads are held still while the keys go.
void Server::HandleReset(bool dropped) {
  std::vector<std::shared_ptr<std::promise<void>>> held;
  std::vector<std::future<void>> holding;
  auto release = std::make_shared<std::promise<void>>();
  std::shared_future<void> released = release->get_future().share();
  for (auto& thread : sum_threads_) {
    auto arrived = std::make_shared<std::promise<void>>();
    holding.push_back(arrived->get_future());
    thread->Post([arrived, released] {
      arrived->set_value();
      released.wait();
    });
  }
  for (auto& f : holding) f.wait();
  SendAsyncReplies(async_->Clear(Aborted(kRoundDropped)));
  if (late_pushes_ > 0) {
    BPS_LOG(Info) << "backup workers: " << late_pushes_.exchange(0)
                  << " late pushes dropped (answered with their round's sum) in this generation";
  }
  {
    std::lock_guard<std::mutex> lock(keys_mu_);
    const std::set<PeerId> identified = generation_.End(dropped);
    for (auto& key : keys_) key.second->retired = true;
    if (dropped) {
      const Status gone = Aborted(kRoundDropped);
      for (auto& key : keys_) {
        for (const ParkedPull& pull : key.second->parked) settler_.ReplyError(pull, key.first, gone);
        key.second->parked.clear();
      }
      Retired retired;
      retired.keys.swap(keys_);
      retired.holders = identified;
      if (!retired.holders.empty() && !retired.keys.empty()) retired_.push_back(std::move(retired));
    }
    keys_.clear();
  }
  release->set_value();
  Message reply;
  reply.type = MessageType::kResetReply;
  transport_->Send(scheduler_, reply.Encode(), nullptr, 0, nullptr);
}

void Server::ReleaseRetired(PeerId peer) {
  for (auto it = retired_.begin(); it != retired_.end();) {
    it->holders.erase(peer);
    it = it->holders.empty() ? retired_.erase(it) : it + 1;
  }
}

std::shared_ptr<ServerKey> Server::CheckedKey(PeerId from, const Message& m, Status* error, bool fetch,
                                              std::shared_ptr<ServerKey>* received) {
  std::lock_guard<std::mutex> lock(keys_mu_);
  if (received != nullptr) {
    auto in_flight = receiving_.find(from);
    if (in_flight != receiving_.end()) {
      std::vector<Receiving>& payloads = in_flight->second;
      for (auto it = payloads.begin(); it != payloads.end(); ++it) {
        if (it->key != m.key || it->request_id != m.request_id) continue;
        *received = std::move(it->entry);
        payloads.erase(it);  // in order: a request id a peer reuses is taken first in, first out
        break;
      }
    }
  }
  const std::optional<int> identified = generation_.RankOf(from);
  if (!identified) return nullptr;  // not a worker: no reply either
  const int rank = *identified;
  auto it = keys_.find(m.key);
  if (it == keys_.end() && generation_.dropped()) {
    *error = Aborted(kRoundDropped);  // a push of the generation that broke, late
    return nullptr;
  }
  if (it == keys_.end()) {
    *error = FailedPrecondition("worker " + std::to_string(rank) + " pushed key " + std::to_string(m.key) +
                                ", which no tensor of this generation has");
    return nullptr;
  }
  ServerKey& entry = *it->second;
  const KeySpec& spec = entry.spec;
  const int expected = ContributionIndex(spec.scope, spec.members, spec.root, rank, generation_.local_size());
  if (fetch ? (spec.scope != TensorScope::kPublished || expected != kReader)
            : (m.dtype != spec.dtype || m.num_elements != spec.count || m.participants != spec.participants ||
               m.sender != expected || expected < 0)) {
    *error = InvalidArgument("worker " + std::to_string(rank) + " pushed " + DataTypeName(m.dtype) + "[" +
                             std::to_string(m.num_elements) + "] as contribution " + std::to_string(m.sender) + " of " +
                             std::to_string(m.participants) + " to a key planned as " + DataTypeName(spec.dtype) +
                             "[" + std::to_string(spec.count) + "], contribution " + std::to_string(expected) +
                             " of " + std::to_string(spec.participants));
    return nullptr;
  }
  if (!entry.round) {
    try {
      // Weights use the round's receive buffers only (AsyncStore keeps the rest).
      const ReduceOp op = spec.op == ReduceOp::kWeights ? ReduceOp::kSum : spec.op;
      entry.arena = arena_;
      entry.round = std::make_unique<KeyRound>(spec.dtype, spec.count, spec.participants, arena_.get(), op,
                                               spec.compression, spec.key, &sum_helpers_, spec.backups,
                                               config_.backup_window);
    } catch (const std::bad_alloc&) {
      *error = Unavailable("the server has no memory for key " + std::to_string(m.key) + " (" +
                           std::to_string(spec.count * DataTypeSize(spec.dtype)) + " bytes per contribution)");
      return nullptr;
    }
  }
  return it->second;
}

void* Server::PayloadDestination(PeerId from, const std::string& header, size_t length) {
  auto m = Message::Decode(header);
  if (!m.ok()) return nullptr;
  const Message& push = m.value();
  if (push.type == MessageType::kPushMany) return FusedInbox(from, push, length);
  const bool residual = push.type == MessageType::kLoadResidual;
  if (push.type != MessageType::kPush && !residual) return nullptr;
  Status error;
  std::shared_ptr<ServerKey> entry = CheckedKey(from, push, &error);
  if (entry == nullptr) return nullptr;
  KeyRound& round = *entry->round;
  if (length != (residual ? round.num_elements() * sizeof(float) : round.wire_bytes())) return nullptr;
  if (residual && !round.has_residual()) return nullptr;
  std::lock_guard<std::mutex> lock(keys_mu_);
  try {
    void* destination = residual ? static_cast<void*>(round.ResidualInbox()) : round.ReceiveBuffer(push.sender);
    if (destination != nullptr) receiving_[from].push_back({push.key, push.request_id, std::move(entry)});
    return destination;
  } catch (const std::bad_alloc&) {
    return nullptr;  // answered with an error: the payload could not be received
  }
}

// A push is also the request for the round's sum: the reply goes out when every worker has pushed. No
// separate acknowledgement or pull request crosses the network, so nothing small waits behind data.
void Server::HandlePush(PeerId from, const Message& m, void* payload) {
  std::shared_ptr<ServerKey> received;  // taken also when the payload was lost
  Status error;
  std::shared_ptr<ServerKey> entry = CheckedKey(from, m, &error, /*fetch=*/false, &received);
  if (entry == nullptr && error.ok()) {
    dropped_.Warn("server dropped a push from " + transport_->PeerName(from) + ": not an identified worker");
    return;
  }
  if (entry != nullptr && m.in_shared && !entry->round->shared()) {
    error = InvalidArgument("worker " + std::to_string(m.sender) +
                            " put its push in shared memory, but this key is not shared");
  } else if (entry != nullptr && payload == nullptr && m.num_elements > 0 && !m.zeros && !m.in_shared &&
             m.share != ShareMode::kInPlace) {
    error = InvalidArgument("push payload of worker " + std::to_string(m.sender) + " could not be received");
  } else if (entry != nullptr && payload != nullptr && received != entry) {
    error = Aborted(kRoundDropped);  // the generation ended while the payload arrived: it went to the old key
  }
  ParkedPull pull{from, m.sender, m.share, m.request_id, m.round, NowSeconds()};
  std::shared_ptr<const SharedArenaView> heap;
  if (error.ok() && m.share != ShareMode::kNone && !m.text.empty() && config_.shared_memory &&
      config_.in_place_pushes) {
    heap = worker_heaps_.Map(from, m.text);  // a worker on this host names its heap
    pull.heap_mapped = heap != nullptr;
  }
  const void* in_place_input = nullptr;
  if (error.ok() && m.share == ShareMode::kInPlace) error = PlaceInHeap(m, *entry, heap, &in_place_input, &pull);
  if (!error.ok()) return settler_.ReplyError(pull, m.key, error);
  if (entry->spec.op == ReduceOp::kWeights) return AsyncPush(entry.get(), pull, m.zeros);
  const uint64_t key = m.key;
  const bool zeros = m.zeros;
  auto sum = [this, key, entry, zeros, pull, in_place_input] {
    SumPush(key, entry.get(), pull.rank, zeros, pull, in_place_input);
  };
  // A small push, or one that is the whole sum (one worker), is summed here, on the transport's thread, when
  // its summing thread is idle: waking that thread would cost more than the sum. A large push with others to
  // add goes to the summing thread, so reading goes on meanwhile.
  const KeyRound& round = *entry->round;
  if (round.wire_bytes() <= kSumHereBytes || round.num_workers() == 1) {
    return SumThreadFor(key).RunHereOrPost(std::move(sum));
  }
  SumThreadFor(key).Post(std::move(sum));
}

void* Server::FusedInbox(PeerId from, const Message& m, size_t length) {
  auto body = FusedBody::Decode(m.text, MessageType::kPush);
  if (!body.ok() || body.value().payload_bytes() != length || length > FusedBody::kMaxPayloadBytes) return nullptr;
  {
    std::lock_guard<std::mutex> lock(keys_mu_);
    if (!generation_.RankOf(from)) return nullptr;
  }
  return fused_inboxes_.Allocate(from, length);  // null: each member fails, its payload not received
}

void Server::HandlePushMany(PeerId from, const Message& m, void* payload) {
  auto body = FusedBody::Decode(m.text, MessageType::kPush);
  std::vector<char> inbox = fused_inboxes_.Take(from, payload);
  {
    std::lock_guard<std::mutex> lock(keys_mu_);
    if (!generation_.RankOf(from)) {
      dropped_.Warn("server dropped a fused push from " + transport_->PeerName(from) + ": not an identified worker");
      return;
    }
  }
  if (!body.ok()) {
    dropped_.Warn("server dropped a malformed PUSH_MANY from " + transport_->PeerName(from));
    return;
  }
  const std::vector<FusedBody::Member>& members = body.value().members;
  const bool received = body.value().payload_bytes() == 0 || (payload != nullptr && !inbox.empty());
  auto fused = std::make_shared<FusedReply>(transport_, from, members.size());
  const char* at = inbox.data();
  for (size_t i = 0; i < members.size(); ++i) {
    const Message& push = members[i].header;
    const size_t bytes = members[i].payload_bytes;
    const char* data = at;
    at += bytes;
    ParkedPull pull{from, push.sender, ShareMode::kNone, push.request_id, push.round, NowSeconds(), fused, i};
    Status error;
    std::shared_ptr<ServerKey> entry = CheckedKey(from, push, &error);
    if (entry != nullptr) {
      const size_t expected = push.zeros ? 0 : entry->round->wire_bytes();
      if (entry->spec.op == ReduceOp::kWeights) {
        error = InvalidArgument("worker " + std::to_string(push.sender) + " fused a push of weights, which "
                                "asynchronous training does not take: set BYTEPS_ENABLE_ASYNC and BYTEPS_STALENESS "
                                "alike on every process");
      } else if (push.share != ShareMode::kNone || push.in_shared) {
        error = InvalidArgument("worker " + std::to_string(push.sender) + " fused a push that uses shared memory");
      } else if (!received) {
        error = InvalidArgument("push payload of worker " + std::to_string(push.sender) + " could not be received");
      } else if (bytes != expected) {
        error = InvalidArgument("worker " + std::to_string(push.sender) + " fused " + std::to_string(bytes) +
                                " bytes for key " + std::to_string(push.key) + ", which takes " +
                                std::to_string(expected));
      } else if (bytes > 0) {
        std::lock_guard<std::mutex> lock(keys_mu_);
        try {
          void* destination = entry->round->ReceiveBuffer(push.sender);
          if (destination == nullptr) {
            error = FailedPrecondition("worker " + std::to_string(push.sender) + " pushed key " +
                                       std::to_string(push.key) + " again before its round completed");
          } else {
            std::memcpy(destination, data, bytes);
          }
        } catch (const std::bad_alloc&) {
          error = Unavailable("the server has no memory for key " + std::to_string(push.key));
        }
      }
    } else if (error.ok()) {
      error = Internal("the connection is no identified worker");  // cannot happen: checked above
    }
    if (!error.ok()) {
      settler_.ReplyError(pull, push.key, error);
      continue;
    }
    const uint64_t key = push.key;
    const bool zeros = push.zeros;
    SumThreadFor(key).Post([this, key, entry, zeros, pull] { SumPush(key, entry.get(), pull.rank, zeros, pull); });
  }
}

void Server::HandleFetch(PeerId from, const Message& m) {
  Status error;
  std::shared_ptr<ServerKey> entry = CheckedKey(from, m, &error, /*fetch=*/true);
  if (entry == nullptr && error.ok()) {
    dropped_.Warn("server dropped a fetch from " + transport_->PeerName(from) + ": not an identified worker");
    return;
  }
  ParkedPull pull{from, kReader, ShareMode::kNone, m.request_id, m.round, NowSeconds()};
  if (entry == nullptr) return settler_.ReplyError(pull, m.key, error);
  const uint64_t key = m.key;
  SumThreadFor(key).Post([this, key, entry, pull] {
    if (pull.round <= entry->round->completed_round()) return settler_.Answer(key, entry.get(), pull);
    entry->parked.push_back(pull);
    settler_.FailIfWaitingOnFinished(key, entry.get());
  });
}

void Server::HandleResidual(PeerId from, const Message& m, void* payload) {
  std::shared_ptr<ServerKey> received;
  Status error;
  std::shared_ptr<ServerKey> entry = CheckedKey(from, m, &error, /*fetch=*/false, &received);
  if (entry == nullptr && error.ok()) {
    dropped_.Warn("server dropped a residual request from " + transport_->PeerName(from) +
                  ": not an identified worker");
    return;
  }
  const bool load = m.type == MessageType::kLoadResidual;
  if (entry != nullptr && !entry->round->has_residual()) {
    error = InvalidArgument("key " + std::to_string(m.key) + " keeps no residual: it is not compressed with "
                            "error feedback");
  } else if (entry != nullptr && load && payload == nullptr) {
    error = InvalidArgument("the residual loaded by worker " + std::to_string(m.sender) + " could not be received");
  } else if (entry != nullptr && payload != nullptr && received != entry) {
    error = Aborted(kRoundDropped);  // the generation ended while the payload arrived
  }
  ParkedPull pull{from, m.sender, ShareMode::kNone, m.request_id, m.round};
  if (!error.ok()) return settler_.ReplyError(pull, m.key, error);
  const uint64_t key = m.key;
  SumThreadFor(key).Post([this, key, entry, pull, load] {
    KeyRound& round = *entry->round;
    if (round.HasPushed(pull.rank)) {
      return settler_.ReplyError(pull, key,
                        FailedPrecondition("worker " + std::to_string(pull.rank) + " moved the residual of key " +
                                           std::to_string(key) + " after pushing round " +
                                           std::to_string(round.accumulating_round()) + "; only between rounds"));
    }
    if (load) round.LoadResidual();
    Message reply;
    reply.type = MessageType::kPullReply;
    reply.request_id = pull.request_id;
    reply.key = key;
    reply.dtype = DataType::kFloat32;
    reply.num_elements = round.num_elements();
    // The residual stays as it is until this worker pushes again, which it does after the reply.
    const size_t bytes = load ? 0 : round.num_elements() * sizeof(float);
    SendCallback keep;
    if (!load) keep = [entry](const Status&) {};  // the residual lives until it is sent
    transport_->Send(pull.peer, reply.Encode(), load ? nullptr : round.residual(), bytes, std::move(keep));
  });
}

void Server::AsyncPush(ServerKey* entry, const ParkedPull& pull, bool zeros) {
  const void* data = nullptr;
  if (!zeros) {
    std::lock_guard<std::mutex> lock(keys_mu_);
    data = entry->round->ReceiveBuffer(pull.rank);
  }
  // The worker pushes again only after this reply, so its receive buffer stays as it is meanwhile.
  SendAsyncReplies(async_->Push(entry->spec, pull, data));
}

void Server::SendAsyncReplies(const std::vector<AsyncReply>& replies) {
  for (const AsyncReply& r : replies) {
    if (!r.status.ok()) {
      settler_.ReplyError(r.to, r.key, r.status);
      continue;
    }
    Message reply;
    reply.type = MessageType::kPullReply;
    reply.request_id = r.to.request_id;
    reply.key = r.key;
    reply.round = r.to.round;
    reply.dtype = r.dtype;
    reply.num_elements = r.count;
    reply.held_us = static_cast<uint64_t>(r.held_seconds * 1e6);
    std::shared_ptr<const std::vector<char>> weights = r.weights;
    // The snapshot lives until the transport has sent it.
    transport_->Send(r.to.peer, reply.Encode(), weights->data(), weights->size(),
                     [weights](const Status&) {});
  }
}

Status Server::PlaceInHeap(const Message& m, const ServerKey& entry, std::shared_ptr<const SharedArenaView> heap,
                           const void** input, ParkedPull* pull) {
  const std::string who = "worker " + std::to_string(m.sender);
  if (heap == nullptr) {
    return Unavailable(who + " pushed in place, but this server cannot map its memory: set "
                       "BYTEPS_IN_PLACE_PUSHES=0 where processes cannot see each other's memory");
  }
  if (m.zeros || entry.spec.op == ReduceOp::kWeights || entry.round->wire_bytes() != entry.round->bytes()) {
    return InvalidArgument(who + " pushed in place a key that takes its data through the transport (zeros, "
                           "compressed, or asynchronous weights)");
  }
  const size_t bytes = entry.round->bytes();
  const char* from = heap->At(m.in_place_input, bytes);
  char* to = heap->At(m.in_place_output, bytes);
  if (from == nullptr || to == nullptr) {
    return InvalidArgument(who + " pushed in place at offsets outside its memory");
  }
  *input = from;
  pull->output = to;
  pull->kept = std::move(heap);
  return Status::OK();
}

void Server::SumPush(uint64_t key, ServerKey* entry, int rank, bool zeros, const ParkedPull& pull,
                     const void* in_place_input) {
  if (entry->retired) return settler_.ReplyError(pull, key, Aborted(kRoundDropped));
  const uint64_t dropped = entry->round->dropped_pushes();
  // A published key's sum is fetched by its readers later: it must stay in the key's buffers.
  const bool may_wait = entry->spec.scope != TensorScope::kPublished;
  auto added = zeros ? entry->round->AddZeros(rank, pull.round)
               : pull.output != nullptr
                   ? entry->round->AddInPlace(rank, pull.round, in_place_input, pull.output, may_wait, pull.kept)
                   : entry->round->Add(rank, pull.round);
  if (!added.ok()) {
    BPS_LOG(Error) << "key " << key << ": " << added.status().message();
    return settler_.ReplyError(pull, key, added.status());
  }
  entry->parked.push_back(pull);
  if (entry->round->dropped_pushes() > dropped) {
    entry->parked.back().late = true;
    ++late_pushes_;
  }
  settler_.Settle(key, entry);
}

// A round that started but did not complete within BYTEPS_TIMEOUT: tell the workers waiting on it who is
// missing, rather than letting them time out with less to go on.
void Server::CheckStaleRounds(size_t thread_index) {
  const double now = NowSeconds();
  if (thread_index == 0) SendAsyncReplies(async_->Expire(now));
  std::vector<std::pair<uint64_t, std::shared_ptr<ServerKey>>> mine;
  {
    std::lock_guard<std::mutex> lock(keys_mu_);
    for (auto& entry : keys_) {
      if (entry.first % sum_threads_.size() == thread_index && entry.second->round) mine.push_back(entry);
    }
  }
  for (auto& item : mine) settler_.FailIfStale(item.first, item.second.get(), now);
}

void Server::OnPeerLost(PeerId peer, const Status& why) {
  // A worker that dies is reported by the scheduler (ABORT); a worker that finished may close before our
  // SHUTDOWN arrives. So only the scheduler's loss ends a server.
  if (peer == scheduler_) {
    std::string lost = "lost the connection to the scheduler (" + why.message() + ")";
    const bool stopped = stop_watch_.JustStopped(NowSeconds());
    if (config_.elastic() && !stopped && book_generation_ > 0 && !finished_.Wait(0)) {
      // The scheduler may be started again: what was in flight is dropped, as for a generation that broke.
      BPS_LOG(Warning) << lost << "; waiting up to BYTEPS_ELASTIC_TIMEOUT=" << config_.elastic_timeout_s
                       << " s for a scheduler at the same address";
      HandleReset(/*dropped=*/true);
      scheduler_gone_ = true;
      return;
    }
    if (config_.elastic() && stopped) {
      lost += "; this server was stopped longer than BYTEPS_TIMEOUT, and an elastic job goes on without a "
              "server it does not hear from: a server started again (bpslaunch --max-restarts) takes its place";
    }
    Finish(Unavailable(lost));
    return;
  }
  worker_heaps_.Forget(peer);
  std::lock_guard<std::mutex> lock(keys_mu_);
  receiving_.erase(peer);
  fused_inboxes_.Forget(peer);
  generation_.Forget(peer);
  ReleaseRetired(peer);
  BPS_LOG(Info) << "connection closed: " << why.message();
}

}  // namespace bps
