#include "cc/ps/server.h"

#include <chrono>
#include <thread>

#include "cc/common/clock.h"
#include "cc/common/logging.h"
#include "cc/common/rank_list.h"
#include "cc/ps/node_setup.h"

namespace bps {

Server::Server(const Config& config, Transport* transport) : config_(config), transport_(transport) {
  for (int i = 0; i < config.server_engine_threads; ++i) {
    engines_.push_back(std::make_unique<WorkThread>([this, i] { CheckStaleRounds(i); }));
  }
}

Server::~Server() {
  for (auto& engine : engines_) engine->Stop();
}

Status Server::Run() {
  transport_->SetHandler(this);
  BPS_RETURN_IF_ERROR(JoinJob(config_, transport_, &scheduler_));
  auto book = address_book_.Wait(config_.timeout_s);
  if (!book) return DeadlineExceeded("the scheduler did not start the job within BYTEPS_TIMEOUT");
  if (!book->status().ok()) return book->status();
  auto decoded = AddressBook::Decode(book->text);
  if (!decoded.ok()) return decoded.status();
  BPS_LOG(Info) << "server " << decoded.value().your_rank << " serving " << decoded.value().num_workers
                << " workers";
  // The job ends only by SHUTDOWN, ABORT or a lost peer; each of those sets `finished_`.
  while (true) {
    auto result = finished_.Wait(3600);
    if (!result) continue;
    if (!result->ok()) {
      // The scheduler sends ABORT to every node at once; leaving at once would let workers see this server's
      // connection drop before the scheduler's message, and report a lost server instead of the root cause.
      std::this_thread::sleep_for(std::chrono::duration<double>(kAbortLingerSeconds));
    }
    return *result;
  }
}

void Server::Finish(const Status& result) { finished_.Set(result); }

void Server::CreateSharedArena() {
  auto arena = SharedArena::Create(kSharedArenaBytes);
  if (!arena.ok()) {
    BPS_LOG(Warning) << "workers on this host will use the transport: no shared memory ("
                     << arena.status().message() << ")";
    return;
  }
  arena_ = std::move(arena.value());
}

Server::KeyEntry* Server::FindOrCreateKey(const Message& m, Status* error) {
  // Every worker process pushes a key, or one process per worker machine (TensorScope::kMachine).
  if (m.participants < 1 || m.participants > num_workers_ || m.sender < 0 || m.sender >= m.participants) {
    *error = InvalidArgument("a push claims to be contribution " + std::to_string(m.sender) + " of " +
                             std::to_string(m.participants) + " in a job of " + std::to_string(num_workers_) +
                             " worker processes");
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(keys_mu_);
  auto it = keys_.find(m.key);
  if (it == keys_.end()) {
    KeyEntry& entry = keys_[m.key];
    entry.round = std::make_unique<KeyRound>(m.dtype, m.num_elements, m.participants, arena_.get());
    return &entry;
  }
  const KeyRound& round = *it->second.round;
  if (round.num_workers() != m.participants) {
    *error = InvalidArgument("a key summed over " + std::to_string(round.num_workers()) +
                             " contributions got a push counting " + std::to_string(m.participants));
    return nullptr;
  }
  if (round.dtype() != m.dtype || round.num_elements() != m.num_elements) {
    *error = InvalidArgument("worker " + std::to_string(m.sender) + " pushed " + DataTypeName(m.dtype) + "[" +
                             std::to_string(m.num_elements) + "] to a key holding " + DataTypeName(round.dtype()) +
                             "[" + std::to_string(round.num_elements()) + "]");
    return nullptr;
  }
  return &it->second;
}

void* Server::PayloadDestination(PeerId, const std::string& header, size_t length) {
  auto m = Message::Decode(header);
  if (!m.ok() || m.value().type != MessageType::kPush) return nullptr;
  const Message& push = m.value();
  Status error;
  KeyEntry* entry = FindOrCreateKey(push, &error);
  if (entry == nullptr || entry->round->bytes() != length) return nullptr;
  std::lock_guard<std::mutex> lock(keys_mu_);
  return entry->round->ReceiveBuffer(push.sender);
}

void Server::OnMessage(PeerId from, const std::string& header, void* payload, size_t) {
  auto decoded = Message::Decode(header);
  if (!decoded.ok()) {
    BPS_LOG(Warning) << "server dropped a malformed message from " << transport_->PeerName(from);
    return;
  }
  const Message& m = decoded.value();
  switch (m.type) {
    case MessageType::kAddressBook: {
      auto book = AddressBook::Decode(m.text);
      if (book.ok() && m.status().ok()) {
        num_workers_ = book.value().num_workers;
        if (config_.shared_memory && book.value().workers_on_your_host > 0) CreateSharedArena();
        Message ready;
        ready.type = MessageType::kServerReady;
        transport_->Send(scheduler_, ready.Encode(), nullptr, 0, nullptr);
      }
      address_book_.Set(m);
      break;
    }
    case MessageType::kPush: HandlePush(from, m, payload); break;
    case MessageType::kShutdown: Finish(Status::OK()); break;
    case MessageType::kAbort:
      address_book_.Set(m);
      Finish(m.status());
      break;
    default:
      BPS_LOG(Warning) << "server ignored " << MessageTypeName(m.type) << " from " << transport_->PeerName(from);
  }
}

void Server::ReplyError(PeerId to, MessageType type, const Message& request, const Status& error) {
  Message reply;
  reply.type = type;
  reply.request_id = request.request_id;
  reply.key = request.key;
  reply.round = request.round;
  reply.set_status(error);
  transport_->Send(to, reply.Encode(), nullptr, 0, nullptr);
}

// A push is also the request for the round's sum: the reply goes out when every worker has pushed. No
// separate acknowledgement or pull request crosses the network, so nothing small waits behind data.
void Server::HandlePush(PeerId from, const Message& m, void* payload) {
  Status error;
  KeyEntry* entry = FindOrCreateKey(m, &error);
  if (entry != nullptr && m.in_shared && !entry->round->shared()) {
    error = InvalidArgument("worker " + std::to_string(m.sender) +
                            " put its push in shared memory, but this key is not shared");
  } else if (entry != nullptr && payload == nullptr && m.num_elements > 0 && !m.zeros && !m.in_shared) {
    error = InvalidArgument("push payload of worker " + std::to_string(m.sender) + " could not be received");
  }
  if (!error.ok() || entry == nullptr) return ReplyError(from, MessageType::kPullReply, m, error);
  uint64_t key = m.key;
  int rank = m.sender;
  ParkedPull pull{from, rank, m.share, m.request_id, m.round};
  const bool zeros = m.zeros;
  EngineFor(key).Post([this, key, entry, rank, zeros, pull] { SumPush(key, entry, rank, zeros, pull); });
}

void Server::SumPush(uint64_t key, KeyEntry* entry, int rank, bool zeros, const ParkedPull& pull) {
  auto completed = zeros ? entry->round->AddZeros(rank, pull.round) : entry->round->Add(rank, pull.round);
  if (!completed.ok()) {
    BPS_LOG(Error) << "key " << key << ": " << completed.status().message();
    Message request;
    request.request_id = pull.request_id;
    request.key = key;
    request.round = pull.round;
    return ReplyError(pull.peer, MessageType::kPullReply, request, completed.status());
  }
  entry->parked.push_back(pull);
  if (!completed.value()) return;
  std::vector<ParkedPull> ready;
  std::vector<ParkedPull> still_waiting;
  for (const ParkedPull& parked : entry->parked) {
    (parked.round <= entry->round->completed_round() ? ready : still_waiting).push_back(parked);
  }
  entry->parked.swap(still_waiting);
  for (const ParkedPull& parked : ready) AnswerPull(key, entry, parked);
}

void Server::AnswerPull(uint64_t key, KeyEntry* entry, const ParkedPull& pull) {
  const KeyRound& round = *entry->round;
  if (pull.round != round.completed_round()) {
    Message request;
    request.request_id = pull.request_id;
    request.key = key;
    request.round = pull.round;
    return ReplyError(pull.peer, MessageType::kPullReply, request,
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
  // A gather's partitions are mostly zeros or one worker's rows: those need no bytes back.
  reply.zeros = round.result_is_zero();
  reply.echo = round.result_sole_contributor() == pull.rank;
  bool payload = !reply.zeros && !reply.echo;
  if (pull.share != ShareMode::kNone && round.shared()) {
    // A worker on this host: its next push goes straight into its receive buffer, and once it has mapped
    // the arena it copies the sum out itself.
    reply.shared_receive = round.ReceiveOffset(pull.rank);
    if (pull.share == ShareMode::kOffer) reply.text = arena_->locator();
    if (pull.share == ShareMode::kMapped && payload) {
      reply.shared_result = round.result_offset();
      payload = false;
    }
  }
  transport_->Send(pull.peer, reply.Encode(), payload ? round.result() : nullptr, payload ? round.bytes() : 0, nullptr);
}

// A round that started but did not complete within BYTEPS_TIMEOUT: tell the workers waiting on it who is
// missing, rather than letting them time out with less to go on.
void Server::CheckStaleRounds(size_t engine_index) {
  const double now = NowSeconds();
  std::vector<std::pair<uint64_t, KeyEntry*>> mine;
  {
    std::lock_guard<std::mutex> lock(keys_mu_);
    for (auto& entry : keys_) {
      if (entry.first % engines_.size() == engine_index) mine.emplace_back(entry.first, &entry.second);
    }
  }
  for (auto& item : mine) {
    KeyEntry* entry = item.second;
    const KeyRound& round = *entry->round;
    if (entry->parked.empty() || !round.round_started() || now - round.round_started_at() < config_.timeout_s) {
      continue;
    }
    const char* who = round.num_workers() == num_workers_ ? "worker(s) " : "worker machine(s) ";
    Status error = DeadlineExceeded(who + RankList(round.MissingWorkers()) + " did not push round " +
                                    std::to_string(round.accumulating_round()) + " within BYTEPS_TIMEOUT");
    for (const ParkedPull& pull : entry->parked) {
      Message request;
      request.request_id = pull.request_id;
      request.key = item.first;
      request.round = pull.round;
      ReplyError(pull.peer, MessageType::kPullReply, request, error);
    }
    entry->parked.clear();
  }
}

void Server::OnPeerLost(PeerId peer, const Status& why) {
  // A worker that dies is reported by the scheduler (ABORT); a worker that finished may close before our
  // SHUTDOWN arrives. So only the scheduler's loss ends a server.
  if (peer == scheduler_) {
    Finish(Unavailable("lost the connection to the scheduler (" + why.message() + ")"));
  } else {
    BPS_LOG(Info) << "connection closed: " << why.message();
  }
}

}  // namespace bps
