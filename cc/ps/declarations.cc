#include "cc/ps/declarations.h"

#include <algorithm>
#include <sstream>

#include "cc/common/clock.h"
#include "cc/common/rank_list.h"
#include "cc/compress/codec.h"
#include "cc/ps/timeouts.h"

namespace bps {
namespace {

// Contribution indices as the ranks (or machine ids) behind them.
std::set<int> ContributorRanks(const TensorSpec& spec, const std::set<int>& indices) {
  std::set<int> ranks;
  for (int index : indices) ranks.insert(ContributorRank(spec.scope, spec.members, spec.root, index));
  return ranks;
}

std::string Seconds(double s) {
  std::ostringstream out;
  out << s << " s";
  return out.str();
}

}  // namespace

Declarations::Declarations(const Config& config, const JobMembership& members, SendFn send)
    : config_(config),
      members_(members),
      send_(std::move(send)),
      planner_(std::make_unique<PartitionPlanner>(config.num_server, config.partition_bytes, config.min_spread_bytes)) {}

void Declarations::StartGeneration(size_t slice_bytes) {
  declarations_.clear();
  plan_requests_.clear();
  key_owner_.clear();
  // Over this generation's servers: an elastic job goes on with fewer when one is lost.
  planner_ = std::make_unique<PartitionPlanner>(std::max(1, members_.active_servers()), config_.partition_bytes,
                                                config_.min_spread_bytes);
  planner_->set_slice_bytes(slice_bytes);
}

int Declarations::expected_participants(const TensorSpec& spec) const {
  switch (spec.scope) {
    case TensorScope::kMachine: return members_.num_worker();
    case TensorScope::kPublished: return 1;
    case TensorScope::kProcess: break;
  }
  return spec.members.empty() ? members_.worker_processes() : static_cast<int>(spec.members.size());
}

int Declarations::participant_of(const TensorSpec& spec, int rank) const {
  return ContributionIndex(spec.scope, spec.members, spec.root, rank, members_.local_size());
}

std::set<int> Declarations::ParticipantsAmong(const TensorSpec& spec, const std::set<int>& ranks) const {
  const int local_size = members_.local_size();
  std::set<int> found;
  std::map<int, int> per_machine;
  for (int rank : ranks) {
    const int index = participant_of(spec, rank);
    if (index >= 0 && spec.scope != TensorScope::kMachine) found.insert(index);
    ++per_machine[rank / local_size];
  }
  if (spec.scope != TensorScope::kMachine) return found;
  std::set<int> machines;  // a machine counts once all of its processes do
  for (const auto& entry : per_machine) {
    if (entry.second == local_size) machines.insert(entry.first);
  }
  return machines;
}

StatusOr<TensorSpec> Declarations::Check(const std::string& body, int rank, bool in_generation) const {
  auto decoded = TensorSpec::Decode(body);
  if (!decoded.ok()) return decoded.status();
  const TensorSpec& spec = decoded.value();
  BPS_RETURN_IF_ERROR(spec.Validate());
  const int workers = members_.worker_processes();
  if (!spec.members.empty() && spec.members.back() >= workers) {
    return InvalidArgument("tensor '" + spec.name + "': its process set names rank " +
                           std::to_string(spec.members.back()) + " in a job of " + std::to_string(workers) +
                           " worker processes");
  }
  if (spec.scope == TensorScope::kPublished && spec.root >= workers) {
    return InvalidArgument("tensor '" + spec.name + "' is published by rank " + std::to_string(spec.root) +
                           " in a job of " + std::to_string(workers) + " worker processes");
  }
  if (participant_of(spec, rank) == kOutsider) {
    return InvalidArgument("tensor '" + spec.name + "' belongs to a process set without worker " +
                           std::to_string(rank) + " (" + spec.ToString() + ")");
  }
  if (!in_generation) {
    return FailedPrecondition("a declaration outside a generation: the job has not started, or this worker "
                              "already finished");
  }
  return decoded;
}

Status Declarations::Declare(PeerId from, int rank, uint64_t request_id, const TensorSpec& spec) {
  Declaration& d = declarations_[spec.name];
  if (d.first_rank < 0) {
    d.spec = spec;
    d.first_rank = rank;
    d.first_seen = NowSeconds();
  }
  d.waiting[rank] = {from, request_id};
  if (d.error.ok() && !(spec == d.spec)) {
    // Shapes that differ only in size, not in rank, are most often batches of different sizes.
    const bool sizes_differ = spec.dtype == d.spec.dtype && spec.shape.size() == d.spec.shape.size() &&
                              spec.shape != d.spec.shape;
    d.error = InvalidArgument("tensor '" + d.spec.name + "': worker " + std::to_string(d.first_rank) +
                              " declared it as " + d.spec.ToString() + " but worker " + std::to_string(rank) +
                              " as " + spec.ToString() +
                              "; every worker must push_pull the same tensors with the same shapes and dtypes." +
                              (sizes_differ ? " Batches of different sizes on different workers (a global batch "
                                              "that does not divide by the number of workers, a last partial "
                                              "batch) give this: gather per-example values, or reduce them to a "
                                              "sum and a count first."
                                            : ""));
  }
  const int participant = participant_of(d.spec, rank);
  if (participant == kReader) {  // a published tensor's reader waits for the publisher's declaration
    if (d.error.ok() && !d.planned && ParticipantsAmong(d.spec, members_.FinishedWorkers()).count(0)) {
      d.error = FailedPrecondition("tensor '" + d.spec.name + "' is published by worker " +
                                   std::to_string(d.spec.root) + ", which finished without publishing it.");
    }
    Answer(d);
    return Status::OK();
  }
  auto twice = d.declared.find(participant);
  if (d.error.ok() && twice != d.declared.end() && twice->second != rank) {
    d.error = InvalidArgument("tensor '" + d.spec.name + "' is pushed once per worker machine, but workers " +
                              std::to_string(twice->second) + " and " + std::to_string(rank) +
                              " of machine " + std::to_string(participant) + " both pushed it.");
    // The other machines may already hold the plan: only ending the job tells every worker.
    if (d.planned) return d.error;
  }
  d.declared[participant] = rank;
  PlanIfComplete(d);
  Answer(d);
  return Status::OK();
}

void Declarations::PlanIfComplete(Declaration& d) {
  if (!d.error.ok() || d.planned || d.plan_request != 0) return;
  // A joined publisher publishes nothing: it never covers a published tensor.
  std::set<int> covered;
  if (d.spec.scope != TensorScope::kPublished) covered = ParticipantsAmong(d.spec, members_.JoinedWorkers());
  for (const auto& entry : d.declared) covered.insert(entry.first);
  std::set<int> gone;
  for (int participant : ParticipantsAmong(d.spec, members_.FinishedWorkers())) {
    if (!covered.count(participant)) gone.insert(participant);
  }
  if (!gone.empty()) {
    d.error = FailedPrecondition("tensor '" + d.spec.name + "' cannot be summed: worker(s) " +
                                 RankList(ContributorRanks(d.spec, gone)) +
                                 " finished (called shutdown() or exited) without pushing it.");
    return;
  }
  if (static_cast<int>(covered.size()) == expected_participants(d.spec)) Plan(d);
}

// Makes the tensor's plan and tells each server holding a key what to expect; the workers get the plan
// once every such server confirmed.
void Declarations::Plan(Declaration& d) {
  uint64_t base = TensorKeyBase(d.spec.name);
  auto owner = key_owner_.find(base);
  if (owner != key_owner_.end() && owner->second != d.spec.name) {
    d.error = InvalidArgument("tensor names '" + owner->second + "' and '" + d.spec.name +
                              "' hash to the same key; rename one of them.");
    return;
  }
  auto plan = planner_->Plan(d.spec);
  if (!plan.ok()) {
    d.error = plan.status();
    return;
  }
  key_owner_[base] = d.spec.name;
  d.plan = plan.value();
  std::map<int, KeyPlanBody> by_server;
  const int participants = expected_participants(d.spec);
  if (d.spec.backups >= participants) {
    d.error = InvalidArgument("tensor '" + d.spec.name + "': BYTEPS_BACKUP_WORKERS=" + std::to_string(d.spec.backups) +
                              " leaves none of its " + std::to_string(participants) + " workers to sum: set it "
                              "below the number of worker processes");
    return;
  }
  for (const Partition& p : d.plan.partitions) {
    if (d.spec.compression.on() && p.count > kMaxCodecElements) {
      d.error = InvalidArgument("tensor '" + d.spec.name + "': a compressed partition holds at most " +
                                std::to_string(kMaxCodecElements) + " elements; lower BYTEPS_PARTITION_BYTES");
      return;
    }
    by_server[p.server].keys.push_back(KeySpec{p.key, d.spec.dtype, p.count, participants, d.spec.scope, d.spec.op,
                                               d.spec.members, d.spec.root, d.spec.compression, d.spec.backups});
  }
  d.plan_request = next_plan_request_++;
  plan_requests_[d.plan_request] = d.spec.name;
  const std::vector<PeerId>& servers = members_.servers();
  for (auto& entry : by_server) {
    Message m;
    m.type = MessageType::kKeyPlan;
    m.request_id = d.plan_request;
    m.text = entry.second.Encode();
    d.unacknowledged.insert(servers[entry.first]);
    send_(servers[entry.first], m);
  }
  if (d.unacknowledged.empty()) d.planned = true;  // an empty tensor: nothing to place
}

void Declarations::OnKeyPlanReply(PeerId from, const Message& m, const std::string& server) {
  auto request = plan_requests_.find(m.request_id);
  if (request == plan_requests_.end()) return;
  Declaration& d = declarations_[request->second];
  if (d.plan_request != m.request_id || !d.unacknowledged.erase(from)) return;
  if (!m.status().ok() && d.error.ok()) {
    d.error = Status(m.status().code(), "tensor '" + d.spec.name + "': " + server + " could not take its keys: " +
                                            m.status().message());
  }
  if (!d.unacknowledged.empty()) return;
  plan_requests_.erase(request);
  if (d.error.ok()) d.planned = true;
  Answer(d);
}

void Declarations::Answer(Declaration& d) {
  if (d.error.ok() && !d.planned) return;
  Message reply;
  reply.type = MessageType::kDeclareReply;
  if (d.error.ok()) {
    reply.text = d.plan.Encode();
  } else {
    reply.set_status(d.error);
  }
  for (auto& waiter : d.waiting) {
    reply.request_id = waiter.second.second;
    send_(waiter.second.first, reply);
  }
  d.waiting.clear();
}

void Declarations::Review() {
  for (auto& entry : declarations_) {
    Declaration& d = entry.second;
    if (d.waiting.empty()) continue;
    PlanIfComplete(d);
    Answer(d);
  }
}

void Declarations::ExpireWaiting(double now) {
  const std::string limit = "BYTEPS_TIMEOUT=" + Seconds(config_.timeout_s);
  for (auto& entry : declarations_) {
    Declaration& d = entry.second;
    if (d.planned || !d.error.ok() || d.plan_request != 0 || now - d.first_seen < MissingWorkerTimeout(config_)) {
      continue;
    }
    if (d.spec.scope == TensorScope::kPublished) {
      d.error = DeadlineExceeded("tensor '" + d.spec.name + "' is published by worker " + std::to_string(d.spec.root) +
                                 ", which did not publish it within " + limit + ".");
      Answer(d);
      continue;
    }
    std::set<int> missing, present;
    for (int p = 0; p < expected_participants(d.spec); ++p) (d.declared.count(p) ? present : missing).insert(p);
    const std::string who = d.spec.scope == TensorScope::kMachine ? "worker machine(s) " : "worker(s) ";
    d.error = DeadlineExceeded("tensor '" + d.spec.name + "' was pushed by " + who +
                               RankList(ContributorRanks(d.spec, present)) + " but not by " + who +
                               RankList(ContributorRanks(d.spec, missing)) + " within " + limit +
                               "; every worker must push_pull the same tensors.");
    Answer(d);
  }
}

}  // namespace bps
