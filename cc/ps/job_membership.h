// Who is in the job, as the scheduler sees it: the registered servers and workers, the connection each one
// registered through (a worker id is bound to that connection), their ranks and tokens, and each worker's
// part in the current generation.
//
// Every change of membership goes through this class: who is admitted, who left, when a generation ends.
// Membership is fixed today (DMLC_NUM_WORKER machines of BYTEPS_LOCAL_SIZE processes, DMLC_NUM_SERVER
// servers, all registered before the job starts); this is where a changing membership would be decided.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "cc/common/config.h"
#include "cc/ps/message.h"
#include "cc/transport/transport.h"

namespace bps {

class JobMembership {
 public:
  // A worker's part in the current generation.
  enum class Part {
    kActive,    // working in it (from registration, or its first declaration after a generation ended)
    kFinished,  // finished it (shutdown())
    kIdle,      // finished the previous generation and has not started this one
    kLeft,      // disconnected while finished or idle: gone for good, without failing the job
  };
  struct Member {
    Role role = Role::kWorker;
    int rank = -1;  // worker rank, or server rank once the job started
    std::string address;
    std::string token;  // a worker's proof of its rank to the servers
    Part part = Part::kActive;
    bool joined = false;  // finished by join(): the rounds and declarations it misses complete without it
  };
  // What a member's lost connection means.
  enum class Departure {
    kFailure,   // it was needed: the job cannot go on (nothing changes here)
    kFinished,  // it had finished this generation: it left for good
    kIdle,      // it had not started this generation: it left for good, and finished nothing in it
  };

  JobMembership(int num_worker, int num_server) : num_worker_(num_worker), num_server_(num_server) {}

  // --- Registration ---

  // Whether `b` fits the job (same sizes, ids in range, a place still free, the job not started); `who`
  // names the process in the reason. If it fits, the process becomes a member bound to `peer`.
  Status Admit(PeerId peer, const RegisterBody& b, const std::string& who);
  // Every server and every worker process registered.
  bool complete() const;
  // The job starts: servers take their ranks in registration order, and nobody is admitted any more.
  void Start();
  bool started() const { return started_; }

  // --- Who is who ---

  const Member* Find(PeerId peer) const;
  std::vector<PeerId> All() const;  // every member's connection
  const std::vector<PeerId>& servers() const { return servers_; }   // by server rank
  const std::map<int, PeerId>& workers() const { return workers_; }  // by worker rank
  int num_worker() const { return num_worker_; }  // worker machines
  int num_server() const { return num_server_; }
  int local_size() const { return local_size_; }  // processes per worker machine, from the first worker
  int worker_processes() const { return num_worker_ * local_size_; }

  // --- Generations ---

  // Worker `peer` works in this generation (an idle one starts it).
  void Activate(PeerId peer);
  // Worker `peer` finished this generation (joined: by join()). False if it had finished already.
  bool Finish(PeerId peer, bool joined);
  // The connection of member `peer` is gone.
  Departure Leave(PeerId peer);
  // Every worker that has not left finished this generation, and at least one did.
  bool GenerationFinished() const;
  // The generation is over: every worker that has not left is idle. Returns those workers' connections.
  std::vector<PeerId> NextGeneration();
  int generation() const { return generation_; }  // counts from 1
  int last_finished() const { return last_finished_; }  // the worker rank that finished last, or -1
  bool AllLeft() const;
  // Ranks of the workers that finished this generation or left: they push nothing more in it.
  std::set<int> FinishedWorkers() const;
  // Of those, the ones that finished by join().
  std::set<int> JoinedWorkers() const;

 private:
  Member* Mutable(PeerId peer);

  const int num_worker_;
  const int num_server_;
  std::map<PeerId, Member> members_;
  std::vector<PeerId> servers_;
  std::map<int, PeerId> workers_;
  int local_size_ = 0;
  bool started_ = false;
  int generation_ = 1;
  int last_finished_ = -1;
};

}  // namespace bps
