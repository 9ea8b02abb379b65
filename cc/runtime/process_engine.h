// The process-wide entry points shared by every front door (the Python module and the TF op library
// link the same core library, so a process has exactly one engine).
//
// A worker process joins the job once (its membership: the transport and its place in the job) and may
// run several generations in it: init() starts one, shutdown() ends it once every worker has, and init()
// may follow. The membership ends with LeaveJob() (at process exit), or when the job fails.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cc/common/config.h"
#include "cc/runtime/engine.h"

namespace bps {

// Reads DMLC_* / BYTEPS_* and starts a generation, joining the job first if this process has not yet.
// Error if already initialised, or if this process's job failed.
Status InitProcessEngine();
// The engine, shared with the caller so that it outlives the caller's use of it even if another thread
// shuts it down meanwhile (requests enqueued after that fail cleanly). nullptr before init and after shutdown.
std::shared_ptr<Engine> ProcessEngine();
// Ends this process's generation: waits for in-flight requests and for every other worker to finish, runs
// the shutdown hooks, releases the engine. OK if not initialised.
Status ShutdownProcessEngine();
// join(): ends this process's generation as ShutdownProcessEngine() does, but lets the other workers go on
// meanwhile (the rounds this worker misses complete without it), then starts the next generation. Returns
// the rank of the worker that finished last. Error if not initialised.
StatusOr<int> JoinProcessEngine();
// Leaves the job for good (shutting down first if needed) and closes every connection. Nothing waits a
// second time after a failure.
Status LeaveJob();
// Where this process stands in an elastic job (bps_tf.elastic asks after a failed collective and at commits).
struct ElasticState {
  bool elastic = false;
  int generation = 0;
  int workers_waiting = 0;  // workers and servers waiting to join the next generation, as the scheduler last said
  int servers = 0;          // this generation's servers
  // The generation broke (a worker was lost), or this worker was removed from the job and may join it
  // again: a failure the elastic API recovers from, by init() again.
  bool membership_changed = false;
  bool local_collectives = false;  // see SetLocalCollectives
};
ElasticState ProcessElasticState();
// Every collective of this process completes with its own value, from now on and in later generations,
// until turned off (Engine::set_local_collectives). On by itself in a worker that joined a running job.
void SetLocalCollectives(bool on);

// Asks the scheduler to abort the whole job with `why` (this worker failed), and fails this process's
// requests at once. A no-op outside a job.
void AbortJob(const std::string& why);
// `hook` runs at every ShutdownProcessEngine() after the engine stopped: caches built on an engine (GPU
// groups) drop it there, so a later init builds them anew.
void AddProcessShutdownHook(std::function<void()> hook);

// Checks the environment of this process without joining anything.
Status ValidateEnvironment();

// Runs this process as the scheduler or a server (per DMLC_ROLE) until the job ends.
Status RunServiceRole();

}  // namespace bps
