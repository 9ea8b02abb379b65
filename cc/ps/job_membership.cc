#include "cc/ps/job_membership.h"

#include "cc/common/tokens.h"

namespace bps {
namespace {

constexpr size_t kTokenBytes = 32;

}  // namespace

Status JobMembership::Admit(PeerId peer, const RegisterBody& b, const std::string& who) {
  if (b.num_worker != num_worker_ || b.num_server != num_server_) {
    return InvalidArgument(who + " has DMLC_NUM_WORKER=" + std::to_string(b.num_worker) + " DMLC_NUM_SERVER=" +
                           std::to_string(b.num_server) + " but the scheduler has " + std::to_string(num_worker_) +
                           " and " + std::to_string(num_server_) + ": every process of a job needs the same values.");
  }
  if (started_) {
    return FailedPrecondition(who + " registered after the job started: every place in the job is taken (a "
                                    "second start of a worker, or a process of another job on the same port?).");
  }
  Member member;
  member.role = static_cast<Role>(b.role);
  member.address = b.address;
  if (b.role == static_cast<int32_t>(Role::kServer)) {
    if (static_cast<int>(servers_.size()) >= num_server_) {
      return InvalidArgument("more servers registered than DMLC_NUM_SERVER=" + std::to_string(num_server_) +
                             " (the extra one is " + who + ").");
    }
    servers_.push_back(peer);
    members_[peer] = member;
    return Status::OK();
  }
  if (b.role != static_cast<int32_t>(Role::kWorker)) {
    return InvalidArgument(who + " registered with DMLC_ROLE=scheduler: only workers and servers join a job.");
  }
  if (b.local_size < 1 || b.local_size > 1024 || b.local_rank < 0 || b.local_rank >= b.local_size ||
      b.worker_id < 0 || b.worker_id >= num_worker_) {
    return InvalidArgument(who + " has DMLC_WORKER_ID=" + std::to_string(b.worker_id) + " BYTEPS_LOCAL_RANK=" +
                           std::to_string(b.local_rank) + " BYTEPS_LOCAL_SIZE=" + std::to_string(b.local_size) +
                           ", outside the job's ranges.");
  }
  if (local_size_ > 0 && b.local_size != local_size_) {
    return InvalidArgument(who + " has BYTEPS_LOCAL_SIZE=" + std::to_string(b.local_size) +
                           " but another worker has " + std::to_string(local_size_) + ".");
  }
  const int rank = b.worker_id * b.local_size + b.local_rank;
  auto taken = workers_.find(rank);
  if (taken != workers_.end()) {
    return InvalidArgument("two workers registered with DMLC_WORKER_ID=" + std::to_string(b.worker_id) +
                           " BYTEPS_LOCAL_RANK=" + std::to_string(b.local_rank) + " (" +
                           members_.at(taken->second).address + " first, then " + b.address +
                           "): give each worker machine its own DMLC_WORKER_ID.");
  }
  if (local_size_ == 0) local_size_ = b.local_size;
  member.rank = rank;
  member.token = RandomBytes(kTokenBytes);
  workers_[rank] = peer;
  members_[peer] = member;
  return Status::OK();
}

bool JobMembership::complete() const {
  return local_size_ > 0 && static_cast<int>(servers_.size()) == num_server_ &&
         static_cast<int>(workers_.size()) == worker_processes();
}

void JobMembership::Start() {
  started_ = true;
  for (size_t i = 0; i < servers_.size(); ++i) members_[servers_[i]].rank = static_cast<int>(i);
}

const JobMembership::Member* JobMembership::Find(PeerId peer) const {
  auto it = members_.find(peer);
  return it == members_.end() ? nullptr : &it->second;
}

std::vector<PeerId> JobMembership::All() const {
  std::vector<PeerId> all;
  for (const auto& entry : members_) all.push_back(entry.first);
  return all;
}

JobMembership::Member* JobMembership::Mutable(PeerId peer) {
  auto it = members_.find(peer);
  return it == members_.end() ? nullptr : &it->second;
}

void JobMembership::Activate(PeerId peer) {
  if (Member* m = Mutable(peer)) m->part = Part::kActive;
}

bool JobMembership::Finish(PeerId peer, bool joined) {
  Member* m = Mutable(peer);
  if (m == nullptr || m->part == Part::kFinished) return false;
  m->part = Part::kFinished;
  m->joined = joined;
  last_finished_ = m->rank;
  return true;
}

JobMembership::Departure JobMembership::Leave(PeerId peer) {
  Member* m = Mutable(peer);
  if (m == nullptr || m->role != Role::kWorker) return Departure::kFailure;
  if (m->part != Part::kFinished && m->part != Part::kIdle) return Departure::kFailure;
  const bool idle = m->part == Part::kIdle;
  m->part = Part::kLeft;
  return idle ? Departure::kIdle : Departure::kFinished;
}

bool JobMembership::GenerationFinished() const {
  bool any_finished = false;
  for (const auto& worker : workers_) {
    const Part part = members_.at(worker.second).part;
    if (part == Part::kActive || part == Part::kIdle) return false;
    any_finished |= part == Part::kFinished;
  }
  return any_finished;
}

std::vector<PeerId> JobMembership::NextGeneration() {
  ++generation_;
  std::vector<PeerId> staying;
  for (const auto& worker : workers_) {
    Member& m = members_.at(worker.second);
    if (m.part == Part::kLeft) continue;
    m.part = Part::kIdle;
    m.joined = false;
    staying.push_back(worker.second);
  }
  return staying;
}

bool JobMembership::AllLeft() const {
  for (const auto& worker : workers_) {
    if (members_.at(worker.second).part != Part::kLeft) return false;
  }
  return true;
}

std::set<int> JobMembership::FinishedWorkers() const {
  std::set<int> ranks;
  for (const auto& worker : workers_) {
    const Part part = members_.at(worker.second).part;
    if (part == Part::kFinished || part == Part::kLeft) ranks.insert(worker.first);
  }
  return ranks;
}

std::set<int> JobMembership::JoinedWorkers() const {
  std::set<int> ranks;
  for (const auto& worker : workers_) {
    const Member& m = members_.at(worker.second);
    if (m.part == Part::kFinished && m.joined) ranks.insert(worker.first);
  }
  return ranks;
}

}  // namespace bps
