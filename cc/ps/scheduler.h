// The scheduler role: rendezvous of servers and workers, the central tensor declaration check and
// partition plan, job-wide shutdown and abort. It carries no tensor data.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cc/common/config.h"
#include "cc/ps/message.h"
#include "cc/ps/partition_planner.h"
#include "cc/transport/transport.h"

namespace bps {

class Scheduler : public MessageHandler {
 public:
  Scheduler(const Config& config, Transport* transport);

  // Listens on DMLC_PS_ROOT_URI:DMLC_PS_ROOT_PORT and runs until every worker finished (OK) or the job
  // failed (the error, also sent to every node as ABORT).
  Status Run();

  void* PayloadDestination(PeerId, const std::string&, size_t) override { return nullptr; }
  void OnMessage(PeerId from, const std::string& header, void* payload, size_t length) override;
  void OnPeerLost(PeerId peer, const Status& why) override;

 private:
  struct Node {
    Role role;
    int rank = -1;  // worker rank, or server rank once assigned
    std::string address;
  };
  struct Declaration {
    TensorSpec spec;
    int first_rank = -1;
    double first_seen = 0;
    std::map<int, std::pair<PeerId, uint64_t>> waiting;  // worker rank -> (peer, request id)
    std::map<int, int> declared;  // participant (worker rank, or machine id per machine) -> worker rank
    bool planned = false;
    PartitionPlan plan;
    Status error;
  };

  void HandleRegister(PeerId from, const Message& m);
  void HandleDeclare(PeerId from, const Message& m);
  void HandleFinish(PeerId from);
  size_t ChooseSliceBytes();
  static std::string HostOf(const std::string& address);
  int WorkersOnHostOf(PeerId node);  // worker processes advertising the same host as `node`
  void SendAddressBooks();
  void SendAddressBook(PeerId to);
  void HandleServerReady(PeerId from);
  void AnswerDeclaration(Declaration& d);
  void CheckTimeouts();
  void Abort(const Status& why);
  void Send(PeerId to, const Message& m);
  std::string NodeName(PeerId peer);
  int expected_workers() const { return config_.num_worker * local_size_; }
  // How many declarations complete a tensor's, and which one worker `rank`'s is.
  int expected_participants(const TensorSpec& spec) const {
    return spec.scope == TensorScope::kMachine ? config_.num_worker : expected_workers();
  }
  int participant_of(const TensorSpec& spec, int rank) const {
    return spec.scope == TensorScope::kMachine ? rank / local_size_ : rank;
  }

  const Config config_;
  Transport* transport_;
  PartitionPlanner planner_;

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
  std::map<std::string, Declaration> declarations_;
  std::map<uint64_t, std::string> key_owner_;  // key base -> tensor name, to catch hash collisions
  std::set<int> finished_;
  bool done_ = false;
  Status result_;
  static constexpr double kRootCauseWaitSeconds = 1.0;
  Status pending_abort_;  // a lost worker, reported unless a lost server explains it first
  double pending_abort_at_ = 0;
};

}  // namespace bps
