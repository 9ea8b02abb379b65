// The scheduler role: rendezvous of servers and workers, the central tensor declaration check and
// partition plan, generations, job-wide shutdown and abort. It carries no tensor data.
//
// Every peer is an authenticated member of the job (the transport checked the job's secret), but members
// can be misconfigured or late: a registration that does not fit the job is turned away with the reason,
// and the job goes on. A message from a peer that may not send it is dropped.
//
// Generations: when every worker has finished (shutdown()), the servers forget every key and the workers
// are told; they may init() again in the same processes (a new generation) or leave. The job ends when
// every worker has finished and disconnected.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cc/common/config.h"
#include "cc/common/logging.h"
#include "cc/ps/message.h"
#include "cc/ps/partition_planner.h"
#include "cc/transport/transport.h"

namespace bps {

class Scheduler : public MessageHandler {
 public:
  Scheduler(const Config& config, Transport* transport);

  // Listens on DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT and runs until every worker finished and left (OK) or the
  // job failed (the error, also sent to every node as ABORT).
  Status Run();

  void* PayloadDestination(PeerId, const std::string&, size_t) override { return nullptr; }
  void OnMessage(PeerId from, const std::string& header, void* payload, size_t length) override;
  void OnPeerLost(PeerId peer, const Status& why) override;

 private:
  // A worker's part in the current generation.
  enum class Part {
    kActive,    // working in it (from registration, or its first declaration after a generation ended)
    kFinished,  // finished it (shutdown())
    kIdle,      // finished the previous generation and has not started this one
    kLeft,      // disconnected while finished or idle: gone for good, without failing the job
  };
  struct Node {
    Role role;
    int rank = -1;  // worker rank, or server rank once assigned
    std::string address;
    std::string token;  // a worker's proof of its rank to the servers
    Part part = Part::kActive;
    bool joined = false;  // finished by join(): the rounds and declarations it misses complete without it
  };
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

  void HandleRegister(PeerId from, const Message& m);
  Status CheckRegistration(const RegisterBody& b, const std::string& who) const;
  void Reject(PeerId from, const std::string& who, const Status& why);
  void HandleDeclare(PeerId from, const Node& node, const Message& m);
  void Plan(Declaration& d);
  void HandleKeyPlanReply(PeerId from, const Message& m);
  void HandleFinish(Node& node, bool joined);
  void HandleResetReply(PeerId from);
  size_t ChooseSliceBytes();
  static std::string HostOf(const std::string& address);
  int WorkersOnHostOf(PeerId node);  // worker processes advertising the same host as `node`
  void SendAddressBooks();
  void SendAddressBook(PeerId to);
  void HandleServerReady(PeerId from);
  void AnswerDeclaration(Declaration& d);
  // After a worker finished: a declaration that waits on it fails (it can never complete), unless the
  // worker joined, which may complete it.
  void ReviewWaitingDeclarations();
  // Fails `d` if a participant finished without declaring it (and did not join); plans it once every
  // participant declared it or joined.
  void PlanIfComplete(Declaration& d);
  void CheckTimeouts();
  void Abort(const Status& why);
  void EndJob();
  void Send(PeerId to, const Message& m);
  void SendToServers(const Message& m);
  std::string NodeName(PeerId peer);
  int expected_workers() const { return config_.num_worker * local_size_; }
  // How many declarations complete a tensor's, and which one worker `rank`'s is (kReader, kOutsider: none).
  int expected_participants(const TensorSpec& spec) const {
    switch (spec.scope) {
      case TensorScope::kMachine: return config_.num_worker;
      case TensorScope::kPublished: return 1;
      case TensorScope::kProcess: break;
    }
    return spec.members.empty() ? expected_workers() : static_cast<int>(spec.members.size());
  }
  int participant_of(const TensorSpec& spec, int rank) const {
    return ContributionIndex(spec.scope, spec.members, spec.root, rank, local_size_);
  }
  // The parts of a declaration that depend on the job's size: members and publisher exist.
  Status CheckAgainstJob(const TensorSpec& spec) const;
  // Workers that finished this generation or left, and will push nothing more in it: by rank, and for
  // per-machine tensors the machines all of whose processes did.
  std::set<int> FinishedParticipants(const TensorSpec& spec) const;
  // Of those, the ones that joined (a publisher that joined publishes nothing: never one of them).
  std::set<int> JoinedParticipants(const TensorSpec& spec) const;
  // The participants of `spec` whose workers pass `test` (per machine: all of the machine's processes).
  std::set<int> ParticipantsWhere(const TensorSpec& spec, const std::function<bool(const Node&)>& test) const;
  // Tells the servers that worker `rank` pushes nothing more in this generation.
  void AnnounceFinished(int rank, bool joined);
  // Every worker that has not left finished: the servers forget the generation's keys.
  void EndGenerationIfAllFinished();
  bool AllLeft() const;

  const Config config_;
  Transport* transport_;
  std::unique_ptr<PartitionPlanner> planner_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::map<PeerId, Node> nodes_;
  std::vector<PeerId> servers_;            // in registration order = server rank
  std::map<int, PeerId> workers_;          // worker rank -> peer
  int local_size_ = 0;                     // learned from the first worker
  bool started_ = false;                   // everyone registered; address books on their way
  AddressBook address_book_;
  std::set<PeerId> ready_servers_;
  double start_time_ = 0;
  std::deque<std::string> turned_away_;    // the last registrations turned away, for the start timeout
  std::map<std::string, Declaration> declarations_;
  std::map<uint64_t, std::string> plan_requests_;  // key plan request id -> tensor name
  uint64_t next_plan_request_ = 1;
  std::map<uint64_t, std::string> key_owner_;  // key base -> tensor name, to catch hash collisions
  std::set<PeerId> resetting_;             // servers still forgetting the generation's keys
  int generation_ = 1;
  int last_finished_ = -1;                 // the worker that finished the generation last
  bool done_ = false;
  Status result_;
  static constexpr double kRootCauseWaitSeconds = 1.0;
  Status pending_abort_;  // a lost worker, reported unless a lost server explains it first
  double pending_abort_at_ = 0;
  ThrottledLog dropped_{"messages dropped or peers turned away"};
};

}  // namespace bps
