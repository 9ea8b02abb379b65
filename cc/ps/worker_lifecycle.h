// A worker's place in the job over its generations: joining (the scheduler's address book: its rank, the
// job's size, its token), proving that rank to every server, ending a generation with the others, and the
// job's failure as the scheduler or a lost peer reports it. The connections outlive generations:
// EndGeneration() keeps them, so that the same process may take part in the next generation (elastic jobs:
// NextGeneration()) without joining anew. A generation that broke (a worker was lost) fails every request
// at once; the next one forms with the others. An elastic worker that loses the scheduler (not because this
// process was stopped) breaks its generation the same way, and registers again with a scheduler started at
// the same address, saying where it was, before it waits for its next book.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>

#include "cc/common/config.h"
#include "cc/common/status.h"
#include "cc/common/stopped_process_watch.h"
#include "cc/ps/message.h"
#include "cc/ps/request_table.h"
#include "cc/ps/server_links.h"
#include "cc/ps/shared_pushes.h"
#include "cc/transport/transport.h"

namespace bps {

class WorkerLifecycle {
 public:
  // `requests` fail with the job (or the generation); `shared` forgets its offsets when the servers forget
  // their keys.
  WorkerLifecycle(const Config& config, Transport* transport, ServerLinks* servers, RequestTable* requests,
                  SharedPushes* shared);

  // Joins the job, connects to every server and proves its rank there. Blocks up to BYTEPS_TIMEOUT (a
  // worker that joins a running elastic job: until it is admitted, up to BYTEPS_ELASTIC_TIMEOUT).
  Status Start();
  // Elastic jobs: starts this worker's next generation and waits for it to form, up to
  // BYTEPS_ELASTIC_TIMEOUT.
  Status NextGeneration();
  // Tells the scheduler this worker finished its generation and waits (up to the timeout) for every other
  // worker to finish too. With `joined`, the rounds this worker misses meanwhile complete without it.
  // Returns the rank of the worker that finished last (-1 if the generation broke).
  StatusOr<int> EndGeneration(bool joined);
  // Asks the scheduler to abort the job, naming `why`, and fails this worker's requests at once.
  void RequestAbort(const std::string& why);

  // The job's first failure (peer lost, ABORT), or OK, after which requests fail at once.
  void Fail(const Status& why);
  // This generation broke (elastic): its requests fail at once, the job goes on.
  void BreakGeneration(const Status& why);

  // Takes a message from the scheduler about the generation or the job; false if it is none of those.
  bool OnSchedulerMessage(const Message& m);
  void OnPeerLost(PeerId peer, const Status& why);

  PeerId scheduler() const { return scheduler_.load(); }
  int rank() const { return rank_; }
  int num_workers() const { return num_workers_; }
  int generation() const { return generation_; }
  int workers_waiting() const { return workers_waiting_; }
  size_t slice_bytes() const { return slice_bytes_; }
  // Whether a failed job may be joined again by a new client: the job is elastic and this worker lost the
  // scheduler while it was stopped (frozen, and so removed), rather than the job being aborted or the
  // scheduler exiting.
  bool rejoinable();
  // Whether this worker joined a job that was running (it waited for a generation), asked once.
  bool TakeJoinedRunning();

 private:
  // Waits for the next ADDRESS_BOOK (or ABORT) until `seconds` pass; a JOIN_PENDING meanwhile extends the
  // wait to BYTEPS_ELASTIC_TIMEOUT.
  StatusOr<AddressBook> AwaitBook(double seconds);
  // Takes this generation's place from `book`: connects to the servers the first time, then proves the new
  // rank to each of them.
  Status TakeBook(const AddressBook& book);
  // Elastic: the scheduler was lost while this worker went on; registers with the one started in its place
  // (up to BYTEPS_ELASTIC_TIMEOUT). With mu_ held (released while it connects).
  Status RejoinScheduler(std::unique_lock<std::mutex>& lock);
  void Send(MessageType type, const std::string& text = "");

  const Config& config_;
  Transport* const transport_;
  ServerLinks* const servers_;
  RequestTable* const requests_;
  SharedPushes* const shared_;
  std::atomic<PeerId> scheduler_{-1};
  std::string listening_;  // where this worker listens (its address in REGISTER)
  std::atomic<int> rank_{0};
  std::atomic<int> num_workers_{0};
  std::atomic<int> generation_{0};
  std::atomic<int> workers_waiting_{0};
  std::atomic<size_t> slice_bytes_{0};

  std::mutex mu_;
  std::condition_variable changed_;  // a book arrived, a generation ended, the job or the generation failed
  std::deque<Message> books_;        // ADDRESS_BOOK (or ABORT) not taken yet
  bool join_pending_ = false;
  bool joined_running_ = false;
  int generations_done_ = 0;
  int last_to_finish_ = -1;  // of the last generation
  bool aborted_ = false;     // the scheduler aborted the job, or this worker asked it to
  bool lost_scheduler_ = false;
  // This process was stopped (SIGSTOP, a paused machine) when it lost the scheduler: the job removed it, and
  // it may join again. A scheduler that exited is not waited for.
  bool lost_scheduler_while_stopped_ = false;
  // Elastic: the scheduler is gone but the job may go on: register again before the next book.
  bool scheduler_gone_ = false;
  // Where this worker was in the job (for REGISTER after a lost scheduler).
  int book_servers_ = 0;
  StoppedProcessWatch stop_watch_;
};

}  // namespace bps
