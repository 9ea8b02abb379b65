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
//
// An elastic job (BYTEPS_MIN_WORKERS, BYTEPS_MAX_WORKERS) goes on when a worker is lost: the generation
// breaks (every worker's requests fail at once, the servers drop the unfinished rounds) and the next one
// forms from the workers that ask for it (init()) and those that registered meanwhile, each with a new rank
// and token; the workers of a running generation are told how many wait to join, so that they can end it
// together (bps_tf.elastic's commit). Below BYTEPS_MIN_WORKERS the next generation waits
// BYTEPS_ELASTIC_TIMEOUT for workers, then the job fails. It ends well once a worker of the last generation
// finished and none is left; when every one of them failed or was lost it fails, naming the last. A lost
// server breaks the generation as a lost worker does, all workers going on, while another server is left; a
// server that registers later takes a lost one's place at the next generation. A scheduler started in the
// place of a lost one (same address) rebuilds an elastic job from its members, which register again saying
// where they were (JobMembership's recovery); they drop what was in flight, as for a generation that broke.
//
// This class runs the protocol. Who is in the job is JobMembership's (job_membership.h), the tensors' plans
// Declarations' (declarations.h); what nodes learn at the start is made in address_books.h.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <string>

#include "cc/common/config.h"
#include "cc/common/logging.h"
#include "cc/ps/declarations.h"
#include "cc/ps/job_membership.h"
#include "cc/ps/message.h"
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
  // Registration and the start of the job.
  void HandleRegister(PeerId from, const Message& m);
  void Reject(PeerId from, const std::string& who, const Status& why);
  void SendAddressBooks();
  // The servers get the book of the generation that starts; the workers theirs once every server is ready.
  void SendGenerationBooks();
  void SendAddressBook(PeerId to);
  void HandleServerReady(PeerId from);
  // Declarations, between the start and the end of a generation.
  void HandleDeclare(PeerId from, const JobMembership::Member& worker, const Message& m);
  // Generations.
  void HandleFinish(PeerId from, bool joined);
  // Tells the servers that worker `rank` pushes nothing more in this generation.
  void AnnounceFinished(int rank, bool joined);
  // Every worker that has not left finished: the servers forget the generation's keys.
  void EndGenerationIfAllFinished();
  void HandleResetReply(PeerId from);
  // Every server forgot the generation's keys: the next generation may form.
  void ResetDone();
  // Elastic jobs: a worker lost in a generation ends it for all (the others' requests fail at once).
  void BreakGeneration(PeerId lost, const Status& why);
  // Elastic jobs: a server is lost. While another is left, the job goes on without it (a running generation
  // breaks, every worker going on); the last one lost fails the job.
  void LoseServer(PeerId lost, const Status& why);
  // Tells the workers their generation broke, and has the servers drop its unfinished rounds.
  void AnnounceBroken(const std::vector<PeerId>& workers, const Status& why);
  void HandleNextGeneration(PeerId from);
  // Forms the next generation once it can (every worker of the last one asked or left, enough of them);
  // ends the job when none is left.
  void CheckFormation();
  // Tells the workers of the running generation how many wait to join it.
  void AnnounceWaiting();
  void CheckFormationTimeouts(double now);
  // The end of the job.
  void CheckTimeouts();
  void Abort(const Status& why);
  // Elastic: no worker of the last generation is left. The job ends well if one of them finished, else it
  // fails naming the last worker lost or failed.
  void EndElasticJob();
  void EndJob();

  void Send(PeerId to, const Message& m);
  void SendToServers(const Message& m);
  std::string NodeName(PeerId peer);

  const Config config_;
  Transport* transport_;

  std::mutex mu_;
  std::condition_variable cv_;
  JobMembership membership_;
  Declarations declarations_;
  AddressBook address_book_;
  std::set<PeerId> ready_servers_;
  std::vector<PeerId> serving_servers_;  // the servers of the last generation that started
  double start_time_ = 0;
  std::deque<std::string> turned_away_;  // the last registrations turned away, for the start timeout
  std::set<PeerId> resetting_;           // servers still forgetting the generation's keys
  bool broken_ = false;                  // the generation being reset broke (elastic)
  bool forming_ = false;                 // elastic: the servers forgot the last generation; the next forms
  double forming_since_ = 0;
  double below_minimum_since_ = -1;      // when the next generation had fewer than min_workers, or -1
  bool done_ = false;
  Status result_;
  static constexpr double kRootCauseWaitSeconds = 1.0;
  Status pending_abort_;  // a lost worker, reported unless a lost server explains it first
  Status last_lost_;      // elastic: the last worker lost or failed, named if no worker is left
  double pending_abort_at_ = 0;
  ThrottledLog dropped_{"messages dropped or peers turned away"};
};

}  // namespace bps
