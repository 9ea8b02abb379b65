#include "cc/ps/job_membership.h"

#include <algorithm>

#include "cc/common/tokens.h"

namespace bps {
namespace {

constexpr size_t kTokenBytes = 32;

}  // namespace

Status JobMembership::Admit(PeerId peer, const RegisterBody& b, const std::string& who) {
  // A member registering again is noted only once admitted: one turned away changes nothing.
  const bool rejoin = b.rejoins() && !started_;
  if (rejoin) BPS_RETURN_IF_ERROR(CheckRejoin(b, who));
  Status admitted = AdmitProcess(peer, b, who, rejoin);
  if (admitted.ok() && rejoin) NoteRejoin(b);
  return admitted;
}

Status JobMembership::AdmitProcess(PeerId peer, const RegisterBody& b, const std::string& who, bool rejoin) {
  if (b.num_worker != num_worker_ || b.num_server != num_server_) {
    return InvalidArgument(who + " has DMLC_NUM_WORKER=" + std::to_string(b.num_worker) + " DMLC_NUM_SERVER=" +
                           std::to_string(b.num_server) + " but the scheduler has " + std::to_string(num_worker_) +
                           " and " + std::to_string(num_server_) + ": every process of a job needs the same values.");
  }
  if (b.min_workers != limits_.min_workers || b.max_workers != limits_.max_workers) {
    return InvalidArgument(who + " has BYTEPS_MIN_WORKERS=" + std::to_string(b.min_workers) + " BYTEPS_MAX_WORKERS=" +
                           std::to_string(b.max_workers) + " but the scheduler has " +
                           std::to_string(limits_.min_workers) + " and " + std::to_string(limits_.max_workers) +
                           " (0: not elastic): every process of a job needs the same values.");
  }
  const bool server = b.role == static_cast<int32_t>(Role::kServer);
  const bool server_place_free = active_servers() + WaitingServers() < num_server_;
  if (started_ && (!elastic() || (server && !server_place_free))) {
    return FailedPrecondition(who + " registered after the job started: every place in the job is taken (a "
                                    "second start of a worker, or a process of another job on the same port?).");
  }
  Member member;
  member.role = static_cast<Role>(b.role);
  member.address = b.address;
  if (server) {
    if (!server_place_free) {
      return InvalidArgument("more servers registered than DMLC_NUM_SERVER=" + std::to_string(num_server_) +
                             " (the extra one is " + who + ").");
    }
    if (started_) {
      member.part = Part::kWaiting;  // elastic: a lost server's place, taken at the next generation
    } else {
      servers_.push_back(peer);
      member.rejoined = rejoin;
      member.seniority = rejoin ? b.last_rank : kFreshSeniority;
    }
    members_[peer] = member;
    return Status::OK();
  }
  if (b.role != static_cast<int32_t>(Role::kWorker)) {
    return InvalidArgument(who + " registered with DMLC_ROLE=scheduler: only workers and servers join a job.");
  }
  const int places = elastic() ? limits_.max_workers : num_worker_;
  if (b.local_size < 1 || b.local_size > 1024 || b.local_rank < 0 || b.local_rank >= b.local_size ||
      b.worker_id < 0 || b.worker_id >= places) {
    return InvalidArgument(who + " has DMLC_WORKER_ID=" + std::to_string(b.worker_id) + " BYTEPS_LOCAL_RANK=" +
                           std::to_string(b.local_rank) + " BYTEPS_LOCAL_SIZE=" + std::to_string(b.local_size) +
                           ", outside the job's ranges.");
  }
  if (local_size_ > 0 && b.local_size != local_size_) {
    return InvalidArgument(who + " has BYTEPS_LOCAL_SIZE=" + std::to_string(b.local_size) +
                           " but another worker has " + std::to_string(local_size_) + ".");
  }
  member.worker_id = b.worker_id;
  if (elastic()) return AdmitElastic(peer, b, who, member, rejoin);
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

Status JobMembership::AdmitElastic(PeerId peer, const RegisterBody& b, const std::string& who, Member member,
                                   bool rejoin) {
  if (b.local_size != 1) {
    return InvalidArgument(who + " has BYTEPS_LOCAL_SIZE=" + std::to_string(b.local_size) +
                           ": elastic jobs run one worker process per machine.");
  }
  int present = 0;
  for (const auto& entry : members_) {
    const Member& m = entry.second;
    if (m.role != Role::kWorker || m.part == Part::kLeft) continue;
    ++present;
    if (m.worker_id == b.worker_id) {
      return InvalidArgument("two workers registered with DMLC_WORKER_ID=" + std::to_string(b.worker_id) + " (" +
                             m.address + " first, then " + b.address + "): give each worker its own "
                             "DMLC_WORKER_ID; a worker's id is free again once it left the job.");
    }
  }
  const int room = started_ || recovering() || rejoin ? limits_.max_workers : num_worker_;
  if (present >= room) {
    return FailedPrecondition(
        who + " cannot join: the job is full (" + std::to_string(present) + " workers" +
        (started_ ? ", BYTEPS_MAX_WORKERS=" + std::to_string(limits_.max_workers) + ")."
                  : " before the start, DMLC_NUM_WORKER=" + std::to_string(num_worker_) + ")."));
  }
  local_size_ = 1;
  member.part = Part::kWaiting;
  member.seniority = started_ ? next_seniority_++ : 0;
  if (!started_ && (recovering() || rejoin)) {
    member.rejoined = rejoin;
    member.seniority = rejoin ? b.last_rank : kFreshSeniority + b.worker_id;
  }
  members_[peer] = member;
  return Status::OK();
}

int JobMembership::Count(Part part) const {
  int count = 0;
  for (const auto& entry : members_) {
    count += entry.second.role == Role::kWorker && entry.second.part == part ? 1 : 0;
  }
  return count;
}

int JobMembership::worker_processes() const {
  return elastic() ? static_cast<int>(workers_.size()) : num_worker_ * local_size_;
}

int JobMembership::registered_workers() const {
  int count = 0;
  for (const auto& entry : members_) {
    count += entry.second.role == Role::kWorker && entry.second.part != Part::kLeft ? 1 : 0;
  }
  return count;
}

bool JobMembership::complete() const {
  if (recovering()) return RecoveryComplete();
  if (static_cast<int>(servers_.size()) != num_server_) return false;
  if (elastic()) return Count(Part::kWaiting) == num_worker_;
  return local_size_ > 0 && static_cast<int>(workers_.size()) == worker_processes();
}

void JobMembership::Start() {
  started_ = true;
  if (recovering()) {
    // The generation after the last one the members named, its servers and workers ranked as they were.
    generation_ = recovery_.generation + 1;
    std::stable_sort(servers_.begin(), servers_.end(), [this](PeerId a, PeerId b) {
      return members_.at(a).seniority < members_.at(b).seniority;
    });
  }
  for (size_t i = 0; i < servers_.size(); ++i) members_[servers_[i]].rank = static_cast<int>(i);
  if (elastic()) {
    next_seniority_ = recovering() ? kFreshSeniority * 2 : 1;
    MakeWaitingAdmissible();
    Form();
  }
}

Status JobMembership::CheckRejoin(const RegisterBody& b, const std::string& who) const {
  if (!elastic()) {
    return FailedPrecondition(who + " registered again after losing its scheduler, but this job is not elastic: "
                                    "only an elastic job (BYTEPS_MIN_WORKERS/BYTEPS_MAX_WORKERS) goes on after "
                                    "a lost scheduler.");
  }
  const bool server = b.role == static_cast<int32_t>(Role::kServer);
  const int most = server ? num_server_ : limits_.max_workers;
  if (b.last_generation < 1 || b.last_generation > (1 << 30) || b.last_rank < 0 || b.last_rank >= most ||
      b.generation_workers < 1 || b.generation_workers > limits_.max_workers || b.generation_servers < 1 ||
      b.generation_servers > num_server_) {
    return InvalidArgument(who + " registered again with a place that does not fit the job (generation " +
                           std::to_string(b.last_generation) + ", rank " + std::to_string(b.last_rank) + ", " +
                           std::to_string(b.generation_workers) + " workers, " +
                           std::to_string(b.generation_servers) + " servers).");
  }
  return Status::OK();
}

void JobMembership::NoteRejoin(const RegisterBody& b) {
  if (!recovering()) {
    // The first member back: those that registered fresh before it rank after every member that was in the job.
    for (auto& entry : members_) {
      if (!entry.second.rejoined) entry.second.seniority = kFreshSeniority + entry.second.worker_id;
    }
  }
  if (b.last_generation > recovery_.generation) {
    recovery_ = Recovery{b.last_generation, b.generation_workers, b.generation_servers};
  } else if (b.last_generation == recovery_.generation) {
    recovery_.workers = std::max(recovery_.workers, static_cast<int>(b.generation_workers));
    recovery_.servers = std::max(recovery_.servers, static_cast<int>(b.generation_servers));
  }
}

int JobMembership::Rejoined(Role role) const {
  int count = 0;
  for (const auto& entry : members_) {
    count += entry.second.role == role && entry.second.rejoined && entry.second.part != Part::kLeft ? 1 : 0;
  }
  return count;
}

bool JobMembership::RecoveryComplete() const {
  // Processes lost with the scheduler may come back fresh (a restarted pod runs its worker again); a worker
  // that was in the job must be there, or the state would be lost.
  return Rejoined(Role::kWorker) >= 1 && registered_workers() >= recovery_.workers &&
         active_servers() >= recovery_.servers;
}

bool JobMembership::RecoveryViable() const {
  return !servers_.empty() && Rejoined(Role::kWorker) >= std::max(1, limits_.min_workers);
}

std::string JobMembership::RecoveryMissing() const {
  return std::to_string(registered_workers()) + " of its " + std::to_string(recovery_.workers) + " workers (" +
         std::to_string(Rejoined(Role::kWorker)) + " of them in it before) and " + std::to_string(active_servers()) +
         " of its " + std::to_string(recovery_.servers) + " servers";
}

const JobMembership::Member* JobMembership::Find(PeerId peer) const {
  auto it = members_.find(peer);
  return it == members_.end() ? nullptr : &it->second;
}

std::vector<PeerId> JobMembership::All() const {
  std::vector<PeerId> all;
  for (const auto& entry : members_) {
    if (entry.second.part != Part::kLeft) all.push_back(entry.first);
  }
  return all;
}

JobMembership::Member* JobMembership::Mutable(PeerId peer) {
  auto it = members_.find(peer);
  return it == members_.end() ? nullptr : &it->second;
}

void JobMembership::Activate(PeerId peer) {
  Member* m = Mutable(peer);
  if (m != nullptr && !elastic() && m->part == Part::kIdle) m->part = Part::kActive;
}

bool JobMembership::Finish(PeerId peer, bool joined) {
  Member* m = Mutable(peer);
  if (m == nullptr || m->role != Role::kWorker || m->part == Part::kFinished) return false;
  // A worker of an elastic job finishes only the generation it works in (not one that broke meanwhile).
  if (elastic() ? m->part != Part::kActive : m->part != Part::kActive && m->part != Part::kIdle) return false;
  m->part = Part::kFinished;
  m->joined = joined;
  m->completed = true;
  last_finished_ = m->rank;
  return true;
}

JobMembership::Departure JobMembership::Leave(PeerId peer) {
  Member* m = Mutable(peer);
  if (m == nullptr || m->role != Role::kWorker) return Departure::kFailure;
  switch (m->part) {
    case Part::kActive: return Departure::kFailure;
    case Part::kLeft: return Departure::kHarmless;
    case Part::kWaiting: m->part = Part::kLeft; return Departure::kHarmless;
    case Part::kFinished: m->part = Part::kLeft; return Departure::kFinished;
    case Part::kIdle:
    case Part::kReady:
      m->part = Part::kLeft;
      return elastic() && !m->completed ? Departure::kLost : Departure::kIdle;
  }
  return Departure::kFailure;
}

bool JobMembership::GenerationFinished() const {
  bool any_finished = false;
  for (const auto& worker : workers_) {
    const Part part = members_.at(worker.second).part;
    if (part == Part::kActive || part == Part::kIdle || part == Part::kReady) return false;
    any_finished |= part == Part::kFinished;
  }
  return any_finished;
}

std::vector<PeerId> JobMembership::NextGeneration() {
  ++generation_;
  MakeWaitingAdmissible();
  std::vector<PeerId> staying;
  for (const auto& worker : workers_) {
    Member& m = members_.at(worker.second);
    if (m.part == Part::kLeft) continue;
    m.part = m.asked_early ? Part::kReady : Part::kIdle;
    if (m.asked_early) m.completed = false;
    m.asked_early = false;
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

std::vector<PeerId> JobMembership::Break(PeerId lost) {
  if (Member* m = Mutable(lost)) m->part = Part::kLeft;
  return NextGeneration();
}

std::vector<PeerId> JobMembership::LoseServer(PeerId lost) {
  RemoveServer(lost);
  return NextGeneration();
}

void JobMembership::RemoveServer(PeerId lost) {
  if (Member* m = Mutable(lost)) m->part = Part::kLeft;
  servers_.erase(std::remove(servers_.begin(), servers_.end(), lost), servers_.end());
}

int JobMembership::WaitingServers() const {
  int count = 0;
  for (const auto& entry : members_) {
    count += entry.second.role == Role::kServer && entry.second.part == Part::kWaiting ? 1 : 0;
  }
  return count;
}

bool JobMembership::Ready(PeerId peer) {
  Member* m = Mutable(peer);
  if (m != nullptr && elastic() && m->role == Role::kWorker && m->part == Part::kActive) m->asked_early = true;
  if (m == nullptr || m->role != Role::kWorker || m->part != Part::kIdle) return false;
  m->part = Part::kReady;
  m->completed = false;  // it goes on: only finishing a later generation counts
  return true;
}

bool JobMembership::Fail(PeerId peer) {
  Member* m = Mutable(peer);
  if (m == nullptr || m->role != Role::kWorker || m->part == Part::kLeft) return false;
  m->completed = false;
  if (m->part == Part::kWaiting) {
    m->part = Part::kLeft;
    return false;
  }
  // A finished worker stays so until its connection closes: the generation it finished ends as before.
  if (m->part == Part::kIdle || m->part == Part::kReady) m->part = Part::kLeft;
  return true;
}

bool JobMembership::LastGenerationFinished() const {
  for (const auto& worker : workers_) {
    if (members_.at(worker.second).completed) return true;
  }
  return false;
}

JobMembership::Formation JobMembership::NextFormation() const {
  const int ready = Count(Part::kReady);
  if (Count(Part::kIdle) > 0) return Formation::kAwaitingWorkers;
  // A generation needs a worker that holds the job's state.
  if (ready == 0) return LastGenerationFinished() ? Formation::kOver : Formation::kLost;
  if (ready + Count(Part::kWaiting) < limits_.min_workers) return Formation::kBelowMinimum;
  return Formation::kForms;
}

void JobMembership::MakeWaitingAdmissible() {
  for (auto& entry : members_) {
    if (entry.second.role == Role::kWorker && entry.second.part == Part::kWaiting) entry.second.admissible = true;
  }
}

void JobMembership::Form() {
  std::vector<Member*> next;
  std::vector<Member*> late;  // registered after the last generation ended
  for (auto& entry : members_) {
    Member& m = entry.second;
    if (m.role != Role::kWorker) continue;
    if (m.part == Part::kReady || (m.part == Part::kWaiting && m.admissible)) next.push_back(&m);
    if (m.part == Part::kWaiting && !m.admissible) late.push_back(&m);
  }
  const auto by_seniority = [](const Member* a, const Member* b) {
    return a->seniority != b->seniority ? a->seniority < b->seniority : a->worker_id < b->worker_id;
  };
  std::sort(late.begin(), late.end(), by_seniority);
  for (size_t i = 0; i < late.size() && static_cast<int>(next.size()) < limits_.min_workers; ++i) {
    next.push_back(late[i]);
  }
  std::sort(next.begin(), next.end(), by_seniority);
  next.resize(std::min<size_t>(next.size(), limits_.max_workers));
  workers_.clear();
  for (auto& entry : members_) {
    Member& m = entry.second;
    if (std::find(next.begin(), next.end(), &m) == next.end()) continue;
    m.part = Part::kActive;
    m.joined = false;
    m.admissible = false;
    m.token = RandomBytes(kTokenBytes);
  }
  for (size_t rank = 0; rank < next.size(); ++rank) next[rank]->rank = static_cast<int>(rank);
  for (auto& entry : members_) {
    if (entry.second.role == Role::kWorker && entry.second.part == Part::kActive) {
      workers_[entry.second.rank] = entry.first;
    }
    if (entry.second.role == Role::kServer && entry.second.part == Part::kWaiting) {
      entry.second.part = Part::kActive;
      servers_.push_back(entry.first);
    }
  }
  for (size_t i = 0; i < servers_.size(); ++i) members_[servers_[i]].rank = static_cast<int>(i);
  last_finished_ = -1;
}

std::vector<PeerId> JobMembership::Waiting() const {
  std::vector<PeerId> waiting;
  for (const auto& entry : members_) {
    if (entry.second.role == Role::kWorker && entry.second.part == Part::kWaiting) waiting.push_back(entry.first);
  }
  return waiting;
}

std::vector<std::string> JobMembership::Idle() const {
  std::vector<std::string> idle;
  for (const auto& entry : members_) {
    if (entry.second.role == Role::kWorker && entry.second.part == Part::kIdle) idle.push_back(entry.second.address);
  }
  return idle;
}

int JobMembership::Candidates() const {
  return Count(Part::kReady) + Count(Part::kIdle) + Count(Part::kWaiting);
}

std::vector<PeerId> JobMembership::DismissWaiting() {
  std::vector<PeerId> waiting;
  for (const auto& entry : members_) {
    if (entry.second.part == Part::kWaiting) waiting.push_back(entry.first);
  }
  for (PeerId peer : waiting) members_.at(peer).part = Part::kLeft;
  return waiting;
}

}  // namespace bps
