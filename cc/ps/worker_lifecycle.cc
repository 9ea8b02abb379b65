#include "cc/ps/worker_lifecycle.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "cc/common/clock.h"
#include "cc/common/kept_after_failure.h"
#include "cc/common/logging.h"
#include "cc/ps/node_setup.h"

namespace bps {

WorkerLifecycle::WorkerLifecycle(const Config& config, Transport* transport, ServerLinks* servers,
                                 RequestTable* requests, SharedPushes* shared)
    : config_(config),
      transport_(transport),
      servers_(servers),
      requests_(requests),
      shared_(shared),
      rank_(config.rank()),
      stop_watch_(config.timeout_s) {}

Status WorkerLifecycle::Start() {
  BPS_RETURN_IF_ERROR(JoinJob(config_, transport_, &scheduler_, &listening_));
  auto book = AwaitBook(config_.timeout_s);
  if (!book.ok()) return book.status();
  return TakeBook(book.value());
}

Status WorkerLifecycle::NextGeneration() {
  BPS_RETURN_IF_ERROR(requests_->failure());
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A scheduler started in the lost one's place learns of this worker by its REGISTER (AwaitBook).
    if (!scheduler_gone_) Send(MessageType::kNextGeneration);
  }
  // Below BYTEPS_MIN_WORKERS the scheduler waits BYTEPS_ELASTIC_TIMEOUT for workers, then aborts the job.
  auto book = AwaitBook(config_.elastic_timeout_s + config_.timeout_s);
  if (!book.ok()) return book.status();
  return TakeBook(book.value());
}

void WorkerLifecycle::Send(MessageType type, const std::string& text) {
  Message m;
  m.type = type;
  m.sender = rank_;
  m.text = text;
  transport_->Send(scheduler_, m.Encode(), nullptr, 0, nullptr);
}

StatusOr<AddressBook> WorkerLifecycle::AwaitBook(double seconds) {
  std::unique_lock<std::mutex> lock(mu_);
  double started = NowSeconds();
  while (books_.empty()) {
    BPS_RETURN_IF_ERROR(requests_->failure());
    if (scheduler_gone_) {
      BPS_RETURN_IF_ERROR(RejoinScheduler(lock));
      started = NowSeconds();  // the new scheduler forms the generation from the members that report
      continue;
    }
    const double limit = join_pending_ ? config_.elastic_timeout_s + config_.timeout_s : seconds;
    const double left = started + limit - NowSeconds();
    if (left <= 0) {
      std::ostringstream text;
      if (join_pending_) {
        text << "this worker was not admitted into the running job within BYTEPS_ELASTIC_TIMEOUT="
             << config_.elastic_timeout_s << " s: its workers did not end a generation (bps_tf.elastic's "
             << "state.commit() does, where workers are waiting)";
      } else {
        text << "the job did not start within " << limit << " s (BYTEPS_TIMEOUT=" << config_.timeout_s
             << "): not every server and worker reached the scheduler";
      }
      return DeadlineExceeded(text.str());
    }
    changed_.wait_for(lock, std::chrono::duration<double>(std::min(left, 1.0)));
  }
  Message reply = books_.front();
  books_.pop_front();
  join_pending_ = false;
  if (!reply.status().ok()) return reply.status();
  return AddressBook::Decode(reply.text);
}

Status WorkerLifecycle::TakeBook(const AddressBook& book) {
  rank_ = book.your_rank;
  num_workers_ = book.num_workers;
  generation_ = book.generation;
  book_servers_ = static_cast<int>(book.servers.size());
  slice_bytes_ = book.slice_bytes;
  if (!servers_->Serves(book.servers)) {
    // The first generation, or an elastic job's servers changed; otherwise a generation keeps the same
    // servers, and this worker takes a new place among workers.
    BPS_RETURN_IF_ERROR(servers_->Connect(book.servers));
    shared_->SetServers(servers_->Names(), servers_->OnThisHost());
  } else {
    // A generation forms once every server reset (drained) the one before: none writes into what the
    // pushes in place of that generation named.
    KeptAfterFailure::OfProcess().ServersDrained();
  }
  return servers_->Identify(rank_, book.your_token);
}

bool WorkerLifecycle::TakeJoinedRunning() {
  std::lock_guard<std::mutex> lock(mu_);
  const bool joined = joined_running_;
  joined_running_ = false;
  return joined;
}

bool WorkerLifecycle::rejoinable() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!config_.elastic() || requests_->failure().ok()) return false;
  // A worker that was stopped loses every connection, the scheduler's among them; a lost last server ends
  // the job (the scheduler says so). Give the other news a moment to arrive.
  changed_.wait_for(lock, std::chrono::seconds(2), [this] { return aborted_ || lost_scheduler_; });
  return lost_scheduler_ && lost_scheduler_while_stopped_ && !aborted_;
}

void WorkerLifecycle::Fail(const Status& why) {
  if (!requests_->SetFailure(why)) return;
  bool may_rejoin;
  {
    // Under the lock: a waiter checked the failure before it waits, or is woken now.
    std::lock_guard<std::mutex> lock(mu_);
    may_rejoin = config_.elastic() && lost_scheduler_ && lost_scheduler_while_stopped_ && !aborted_;
    changed_.notify_all();
  }
  if (may_rejoin) {
    // Stopped longer than BYTEPS_TIMEOUT: the job went on without this worker (see rejoinable).
    BPS_LOG(Warning) << why.message() << "; this process was stopped, and an elastic job removes a worker "
                     << "it does not hear from: the worker joins it again at its next init()";
  } else {
    BPS_LOG(Error) << "the job failed: " << why.message();
  }
  requests_->FailAll(why);
}

void WorkerLifecycle::BreakGeneration(const Status& why) {
  if (!requests_->SetGenerationFailure(why)) return;
  shared_->ForgetOffsets();  // the servers drop the generation's keys
  BPS_LOG(Warning) << why.message();
  {
    std::lock_guard<std::mutex> lock(mu_);
    changed_.notify_all();
  }
  requests_->FailAll(why);
}

bool WorkerLifecycle::OnSchedulerMessage(const Message& m) {
  switch (m.type) {
    case MessageType::kAddressBook: {
      // What follows the book on this connection is about its generation.
      requests_->StartGeneration();
      workers_waiting_ = 0;
      shared_->ForgetOffsets();
      std::lock_guard<std::mutex> lock(mu_);
      books_.push_back(m);
      changed_.notify_all();
      return true;
    }
    case MessageType::kJoinPending: {
      std::lock_guard<std::mutex> lock(mu_);
      join_pending_ = joined_running_ = true;
      BPS_LOG(Info) << "waiting to join the running job at its next generation";
      return true;
    }
    case MessageType::kWorkersWaiting: workers_waiting_ = m.sender; return true;
    case MessageType::kGenerationBroken: BreakGeneration(m.status()); return true;
    case MessageType::kGenerationDone: {
      shared_->ForgetOffsets();  // the servers forgot every key: offsets into their shared memory no longer hold
      std::lock_guard<std::mutex> lock(mu_);
      ++generations_done_;
      last_to_finish_ = m.sender;
      changed_.notify_all();
      return true;
    }
    case MessageType::kAbort: {
      {
        std::lock_guard<std::mutex> lock(mu_);
        aborted_ = true;
        books_.push_back(m);
      }
      Fail(m.status());
      return true;
    }
    default: return false;
  }
}

void WorkerLifecycle::OnPeerLost(PeerId peer, const Status& why) {
  std::string who = "a peer";
  if (peer == scheduler_) who = "the scheduler";
  if (auto server = servers_->ServerAt(peer)) who = servers_->Name(*server);
  bool scheduler_may_return = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (peer == scheduler_) {
      lost_scheduler_ = true;
      lost_scheduler_while_stopped_ = stop_watch_.JustStopped(NowSeconds());
      // Not when this process was stopped (the job removed it: it joins again as a new client, see
      // rejoinable) nor once the job failed or this worker asked it to.
      scheduler_may_return = config_.elastic() && !lost_scheduler_while_stopped_ && !aborted_ &&
                             requests_->failure().ok() && (generation_ > 0 || join_pending_);
      scheduler_gone_ = scheduler_may_return;
    }
    changed_.notify_all();
  }
  Status lost = Unavailable("lost " + who + ": it exited or its connection broke (" + why.message() + ")");
  if (scheduler_may_return) {
    KeptAfterFailure::OfProcess().KeepForever();  // whether every server dropped its rounds is not known
    BreakGeneration(Aborted(lost.message() + "; the job goes on once a scheduler is started again at " +
                            config_.root_uri + ":" + std::to_string(config_.root_port) +
                            " (bpslaunch --max-restarts), within BYTEPS_ELASTIC_TIMEOUT"));
  } else if (config_.elastic() && servers_->ServerAt(peer)) {
    // An elastic job goes on without a lost server while another is left (the scheduler says which): this
    // generation is over.
    servers_->Lost(peer);
    KeptAfterFailure::OfProcess().KeepForever();  // before the generation's requests fail and keep their memory
    BreakGeneration(Aborted("the job's servers changed: " + lost.message()));
  } else if (servers_->Retired(peer)) {
    // A server of an earlier generation: it had no part in this one.
  } else {
    Fail(lost);
  }
  // What the lost connection was still carrying, now that it carries nothing (the rest failed above, or goes
  // on: a retired server's connection may close in a later generation).
  requests_->FailPeer(lost, peer);
}

Status WorkerLifecycle::RejoinScheduler(std::unique_lock<std::mutex>& lock) {
  Rejoin where;
  where.generation = std::max(1, generation_.load());
  where.rank = rank_;
  where.workers = num_workers_;
  where.servers = book_servers_;
  // A worker waiting to join (no generation yet) registers as it did the first time.
  if (join_pending_ || generation_ == 0) where = Rejoin{};
  scheduler_gone_ = false;
  lock.unlock();
  BPS_LOG(Warning) << "registering again with the scheduler at " << config_.root_uri << ":" << config_.root_port;
  Status joined = RejoinJob(config_, transport_, listening_, where, NowSeconds() + config_.elastic_timeout_s,
                            [this] { return !requests_->failure().ok(); }, &scheduler_);
  lock.lock();
  if (!joined.ok()) {
    lock.unlock();
    Fail(joined);
    lock.lock();
    return joined;
  }
  lost_scheduler_ = false;
  return Status::OK();
}

StatusOr<int> WorkerLifecycle::EndGeneration(bool joined) {
  std::unique_lock<std::mutex> lock(mu_);
  BPS_RETURN_IF_ERROR(requests_->failure());
  if (!requests_->generation_failure().ok()) return -1;  // it broke: it is over for everyone already
  const int before = generations_done_;
  Send(MessageType::kFinish, joined ? kJoinedMark : "");
  bool done = changed_.wait_for(lock, std::chrono::duration<double>(config_.timeout_s), [&] {
    return generations_done_ > before || !requests_->refusal().ok();
  });
  BPS_RETURN_IF_ERROR(requests_->failure());
  if (!requests_->generation_failure().ok()) return -1;
  if (!done) return DeadlineExceeded("other workers did not finish within BYTEPS_TIMEOUT; leaving anyway");
  return last_to_finish_;
}

void WorkerLifecycle::RequestAbort(const std::string& why) {
  Send(MessageType::kAbortRequest, why);
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
  }
  Fail(Aborted("this worker failed: " + why));
}

}  // namespace bps
