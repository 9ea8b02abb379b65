// Who is in the job, as the scheduler sees it: the registered servers and workers, the connection each one
// registered through (a worker id is bound to that connection), their ranks and tokens, and each worker's
// part in the current generation.
//
// Every change of membership goes through this class: who is admitted, who left, when a generation ends,
// who is in the next. A job of fixed membership has DMLC_NUM_WORKER machines of BYTEPS_LOCAL_SIZE processes
// and DMLC_NUM_SERVER servers, all registered before it starts; its workers keep their ranks.
//
// An elastic job (ElasticLimits) starts the same way, then changes: a worker lost in a generation ends it
// for everyone (Break); a worker that registers later waits (kWaiting) and is admitted when the next
// generation forms, which takes every worker of the last one that asked for it (kReady) and the waiting
// ones, never more than max_workers, and needs at least min_workers of them and one worker of the last
// generation. Ranks are renumbered 0..n-1 for every generation, the longest-serving workers first, so rank 0
// holds the state the others take (bps_tf.elastic's sync), and every generation has fresh tokens.
//
// An elastic job with more than one server also goes on when a server is lost (LoseServer): the generation
// ends for every worker, none of them lost, and the next one plans its tensors over the servers left. A
// server that registers later (a restarted one takes the lost one's place) waits like a late worker and is
// taken into the next generation, whose servers are ranked anew: those of the last generation first.
//
// A scheduler started in the place of a lost one rebuilds a running elastic job (Recovering): its members
// register again saying where they were (RegisterBody's rejoin fields); it starts once every member of the
// last generation they name is back (RecoveryComplete; or, after BYTEPS_TIMEOUT, with those that are:
// RecoveryViable), as the generation after it, ranking the members as they were ranked.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "cc/common/config.h"
#include "cc/ps/message.h"
#include "cc/transport/transport.h"

namespace bps {

// An elastic job's bounds on its worker processes; max_workers 0: not elastic.
struct ElasticLimits {
  int min_workers = 0;
  int max_workers = 0;
  bool on() const { return max_workers > 0; }
};

class JobMembership {
 public:
  // A worker's part in the current generation.
  enum class Part {
    kActive,    // working in it (from registration, or its first declaration after a generation ended)
    kFinished,  // finished it (shutdown())
    kIdle,      // the previous generation ended and it has not started this one
    kLeft,      // disconnected while finished or idle (or lost, elastic): gone for good
    kWaiting,   // elastic: registered while the job ran, waits to be admitted into the next generation
    kReady,     // elastic: asked to be in the next generation (init() after the last one ended)
  };
  struct Member {
    Role role = Role::kWorker;
    int worker_id = 0;
    int rank = -1;  // worker rank in this generation (-1: none yet), or server rank once the job started
    int seniority = 0;  // the order of admission: the lower, the longer in the job
    std::string address;
    std::string token;  // a worker's proof of its rank to the servers, for this generation
    Part part = Part::kActive;
    bool joined = false;  // finished by join(): the rounds and declarations it misses complete without it
    // Finished its last generation (shutdown()) and asked for no other: leaving then ends its part well. A
    // worker that fails or is lost before it leaves ends nothing well (elastic: see LastGenerationFinished).
    bool completed = false;
    // Elastic, waiting: it was waiting when the last generation ended, so the next one takes it.
    bool admissible = false;
    // Elastic, working: it asked for the next generation before this one broke (it saw a server's connection
    // break before the scheduler did): once the generation breaks, it is ready.
    bool asked_early = false;
    bool rejoined = false;  // registered again with this scheduler, having been in the job (Recovering)
  };
  // What a member's lost connection means.
  enum class Departure {
    kFailure,   // it was needed: the job cannot go on (nothing changes here); elastic: see Break
    kFinished,  // it had finished this generation: it left for good
    kIdle,      // it had not started this generation (or, elastic, asked for the next): it left for good
    kHarmless,  // elastic: it waited to join, or had gone already: nothing depended on it
    kLost,      // elastic: it was idle or ready without having finished (a survivor of a broken generation):
                // a lost worker, as one lost while working; the others go on
  };
  // Whether the next generation of an elastic job can form.
  enum class Formation {
    kForms,           // every worker of the last generation asked or left, and enough are there
    kAwaitingWorkers,  // some worker of the last generation has neither asked nor left yet
    kBelowMinimum,     // fewer than min_workers would be in it: waiting for workers to join
    kOver,             // no worker of the last generation is left, and one of them finished: the job ended well
    kLost,             // no worker of the last generation is left, and none finished (each failed or was lost):
                       // the job failed
  };

  JobMembership(int num_worker, int num_server, ElasticLimits limits = {})
      : num_worker_(num_worker), num_server_(num_server), limits_(limits) {}

  // --- Registration ---

  // Whether `b` fits the job (same sizes, ids in range, a place still free, the job not started or, elastic,
  // room below max_workers); `who` names the process in the reason. If it fits, the process becomes a member
  // bound to `peer` (elastic, after the start: a waiting one).
  Status Admit(PeerId peer, const RegisterBody& b, const std::string& who);
  // Every server and every first worker process registered.
  bool complete() const;
  // The job starts: servers take their ranks in registration order; nobody is admitted any more unless the
  // job is elastic, whose first generation forms.
  void Start();
  bool started() const { return started_; }
  bool elastic() const { return limits_.on(); }
  const ElasticLimits& limits() const { return limits_; }

  // --- A scheduler started in a lost one's place (elastic) ---

  // Members registered again saying where they were: this scheduler rebuilds a running job.
  bool recovering() const { return recovery_.generation > 0; }
  int recovered_generation() const { return recovery_.generation; }
  // As many workers and servers as the last generation the members named had are back (some may have been
  // started again, registering fresh), at least one of its workers among them.
  bool RecoveryComplete() const;
  // Enough is back to go on without the others: a server and BYTEPS_MIN_WORKERS workers.
  bool RecoveryViable() const;
  // Who of that generation is missing, for messages.
  std::string RecoveryMissing() const;

  // --- Who is who ---

  const Member* Find(PeerId peer) const;
  std::vector<PeerId> All() const;  // every member's connection
  const std::vector<PeerId>& servers() const { return servers_; }   // by server rank
  const std::map<int, PeerId>& workers() const { return workers_; }  // this generation's, by worker rank
  // Worker machines and processes in this generation (elastic: one process per machine).
  int num_worker() const { return elastic() ? worker_processes() : num_worker_; }
  int num_server() const { return num_server_; }  // the job's DMLC_NUM_SERVER
  int active_servers() const { return static_cast<int>(servers_.size()); }  // this generation's
  int local_size() const { return local_size_; }  // processes per worker machine, from the first worker
  int worker_processes() const;
  int registered_workers() const;  // worker processes that registered and have not left

  // --- Generations ---

  // Worker `peer` works in this generation (an idle one starts it; not in an elastic job, whose generations
  // form).
  void Activate(PeerId peer);
  // Worker `peer` finished this generation (joined: by join()). False if it had finished already, or does
  // not work in this generation.
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

  // --- Elastic ---

  // Worker `lost`, working in this generation, is gone: the generation is over for everyone (it left, the
  // others are idle). Returns the others' connections.
  std::vector<PeerId> Break(PeerId lost);
  // Server `lost` of this generation is gone, and others are left: it leaves, the generation is over for
  // every worker (each is idle, none lost). Returns the workers' connections.
  std::vector<PeerId> LoseServer(PeerId lost);
  // Server `lost` is gone while no generation runs (one ends or forms): it leaves, the next one goes without.
  void RemoveServer(PeerId lost);
  // Servers that registered after the start and wait to be taken into the next generation.
  int WaitingServers() const;
  // Idle worker `peer` asks to be in the next generation. False if it is not idle (a working one is noted:
  // see Member::asked_early).
  bool Ready(PeerId peer);
  // Worker `peer` reported a failure (an uncaught exception) while not working in a generation: between two
  // of them, or after it finished. It is lost as if its connection had closed, and what it finished no longer
  // counts. False if nothing depended on it (it waited to join, or had left).
  bool Fail(PeerId peer);
  // Whether a worker of the last generation finished it and asked for no other (see Member::completed).
  bool LastGenerationFinished() const;
  Formation NextFormation() const;
  // Forms the next generation (NextFormation() is kForms): the ready workers and the admissible waiting ones
  // (the others too where the minimum needs them), ranked by seniority, with fresh tokens, start it; the
  // waiting servers join the last generation's ones.
  void Form();
  // Workers that wait to join, and those of them that stay: the idle workers of the last generation.
  std::vector<PeerId> Waiting() const;
  std::vector<std::string> Idle() const;  // their addresses, for messages
  // Workers that may still come to the next generation: ready, idle and waiting ones.
  int Candidates() const;
  // The waiting workers and servers are told the job ended: they leave.
  std::vector<PeerId> DismissWaiting();

 private:
  Member* Mutable(PeerId peer);
  // A worker of an elastic job: its id is free and there is room.
  // Admit's checks and admission; `rejoin`: a member of the job registering again before the start.
  Status AdmitProcess(PeerId peer, const RegisterBody& b, const std::string& who, bool rejoin);
  Status AdmitElastic(PeerId peer, const RegisterBody& b, const std::string& who, Member member, bool rejoin);
  int Count(Part part) const;
  // A generation ended (or the job starts): the workers waiting now are taken into the next one.
  void MakeWaitingAdmissible();
  // A registration that says where the process was in the job (b.rejoins()): whether it fits the job, and,
  // once its process is admitted, what it says of the last generation.
  Status CheckRejoin(const RegisterBody& b, const std::string& who) const;
  void NoteRejoin(const RegisterBody& b);
  int Rejoined(Role role) const;
  // Members that registered fresh rank after those that were in the job (rank 0 holds the state).
  static constexpr int kFreshSeniority = 1 << 20;

  struct Recovery {
    int generation = 0;  // the latest generation a member named
    int workers = 0;     // its workers and servers
    int servers = 0;
  };
  Recovery recovery_;

  const int num_worker_;
  const int num_server_;
  const ElasticLimits limits_;
  std::map<PeerId, Member> members_;
  std::vector<PeerId> servers_;
  std::map<int, PeerId> workers_;
  int local_size_ = 0;
  bool started_ = false;
  int generation_ = 1;
  int last_finished_ = -1;
  int next_seniority_ = 0;
};

}  // namespace bps
