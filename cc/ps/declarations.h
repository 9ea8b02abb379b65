// The scheduler's central check of tensor declarations and their partition plans. Every worker declares
// each tensor it push_pulls (DECLARE); once every participant declared it alike (or finished by join()),
// the tensor is planned, each server holding one of its keys confirms them (KEY_PLAN), and only then do the
// waiting workers get the plan, so no push reaches a server that cannot check it. A mismatch, a participant
// that finished without declaring, or BYTEPS_TIMEOUT without every declaration fails the tensor on every
// worker that declared it, with a reason that names who differs or is missing.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "cc/common/config.h"
#include "cc/ps/job_membership.h"
#include "cc/ps/message.h"
#include "cc/ps/partition_planner.h"

namespace bps {

class Declarations {
 public:
  using SendFn = std::function<void(PeerId to, const Message& m)>;

  // Plans with config's partition size over `members`' servers; replies and key plans go out through `send`.
  Declarations(const Config& config, const JobMembership& members, SendFn send);

  // The body of a DECLARE from worker `rank`, checked against the job: a valid spec whose process set and
  // publisher exist and include the worker. `in_generation`: the job started and the worker has not finished
  // this generation.
  StatusOr<TensorSpec> Check(const std::string& body, int rank, bool in_generation) const;
  // Worker `rank` (connection `from`) declares `spec` (checked); it gets the plan or the tensor's error
  // when known, in a DECLARE_REPLY to `request_id`. A non-OK result is an error only ending the job
  // reports to every worker (other workers may hold the tensor's plan already).
  Status Declare(PeerId from, int rank, uint64_t request_id, const TensorSpec& spec);
  // A server's KEY_PLAN_REPLY; `server` names it in errors.
  void OnKeyPlanReply(PeerId from, const Message& m, const std::string& server);
  // A worker finished or left: declarations waiting on it fail, or complete if it joined.
  void Review();
  // Declarations that waited more than BYTEPS_TIMEOUT for their participants fail.
  void ExpireWaiting(double now);
  // A new generation: every tensor is forgotten; partitions are cut in slices of `slice_bytes` (0: whole).
  void StartGeneration(size_t slice_bytes);

 private:
  struct Declaration {
    TensorSpec spec;
    int first_rank = -1;
    double first_seen = 0;
    std::map<int, std::pair<PeerId, uint64_t>> waiting;  // worker rank -> (peer, request id)
    std::map<int, int> declared;  // participant (worker rank, or machine id per machine) -> worker rank
    bool planned = false;         // the plan is made and every server holding a key acknowledged it
    PartitionPlan plan;
    std::set<PeerId> unacknowledged;  // servers that have not confirmed the plan's keys yet
    uint64_t plan_request = 0;
    Status error;
  };

  // Fails `d` if a participant finished without declaring it (and did not join); plans it once every
  // participant declared it or joined.
  void PlanIfComplete(Declaration& d);
  void Plan(Declaration& d);
  // Replies to every worker waiting on `d`, once it is planned or has failed.
  void Answer(Declaration& d);
  // How many declarations complete a tensor's, and which one worker `rank`'s is (kReader, kOutsider: none).
  int expected_participants(const TensorSpec& spec) const;
  int participant_of(const TensorSpec& spec, int rank) const;
  // The participants of `spec` among worker `ranks` (per machine: the machines all of whose processes are).
  std::set<int> ParticipantsAmong(const TensorSpec& spec, const std::set<int>& ranks) const;

  const Config config_;
  const JobMembership& members_;
  const SendFn send_;
  std::unique_ptr<PartitionPlanner> planner_;
  std::map<std::string, Declaration> declarations_;
  std::map<uint64_t, std::string> plan_requests_;  // key plan request id -> tensor name
  uint64_t next_plan_request_ = 1;
  std::map<uint64_t, std::string> key_owner_;  // key base -> tensor name, to catch hash collisions
};

}  // namespace bps
