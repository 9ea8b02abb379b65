// Job configuration, parsed once from DMLC_* / BYTEPS_* environment variables (names as in BytePS/ps-lite).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "cc/common/status.h"

namespace bps {

enum class Role { kScheduler, kServer, kWorker };
// How processes talk: bps_tf's own authenticated TCP (everywhere), or UCX (for RDMA).
enum class TransportKind { kTcp, kUcx };

// The shortest job secret accepted, in bytes.
constexpr size_t kMinJobSecretBytes = 16;
// The longest BYTEPS_TIMEOUT accepted: a week.
constexpr double kMaxTimeoutS = 7 * 24 * 3600;
const char* RoleName(Role role);

using Environment = std::map<std::string, std::string>;

// The process environment as a map (tests pass their own map instead).
Environment ProcessEnvironment();

// Whether a UCX_TLS list names an RDMA transport (ib; rc, ud, dc and their variants such as rc_x).
bool ListsRdmaTransport(const std::string& tls);

// BYTEPS_TCP_IO_THREADS when unset: half of `cores`, at least 1 and at most 4 (4 threads carry 100 Gbit/s;
// the other cores sum and train).
int DefaultTcpIoThreads(unsigned cores);

struct Config {
  Role role = Role::kWorker;
  std::string root_uri;  // scheduler address
  int root_port = 0;
  int num_worker = 1;    // worker machines
  int num_server = 1;
  int worker_id = 0;     // this worker machine's id (workers only)
  int local_size = 1;    // worker processes on this machine
  int local_rank = 0;
  std::string interface;  // DMLC_INTERFACE: NIC whose address this node advertises
  std::string node_host;  // DMLC_NODE_HOST: address this node advertises (wins over interface)
  bool enable_rdma = false;
  std::string ucx_tls;    // BYTEPS_UCX_TLS: explicit UCX transports, wins over enable_rdma
  std::string user_ucx_tls;  // UCX_TLS: UCX's own variable, used when neither of the above is set
  // BYTEPS_JOB_SECRET, or the contents of BYTEPS_JOB_SECRET_FILE: every connection proves it holds this.
  // Never logged or sent.
  std::string job_secret;
  // BYTEPS_TRANSPORT (tcp or ucx); UCX by default when RDMA is enabled or BYTEPS_UCX_TLS is set.
  TransportKind transport = TransportKind::kTcp;
  // BYTEPS_TCP_SNDBUF: SO_SNDBUF of TCP connections between hosts (0: the kernel's autotuning). Bytes in a
  // socket's buffer have left the credit window and its priority order; the kernel doubles the value.
  size_t tcp_send_buffer_bytes = 65536;
  // BYTEPS_TCP_IO_THREADS: threads that move one process's TCP traffic, its connections spread over them
  // (the kernel's TCP needs several cores for 100 Gbit/s). Default: half the cores, 1 to 4 (DefaultTcpIoThreads).
  int tcp_io_threads = 1;
  size_t partition_bytes = 4096000;
  // Between hosts over TCP, each partition crosses the network in slices of at most this many bytes, each
  // summed and returned on its own, so the first slices come back while the last are still arriving (a 4 MB
  // partition held back every worker's sum until all of it had crossed every link). 0: whole partitions.
  // Not used on one host or over RDMA, where whole partitions are faster.
  size_t slice_bytes = 256000;
  // The smallest piece the scheduler spreads a tensor in over the servers (PartitionPlanner): each piece
  // costs a server a push and a reply from every worker machine, so fast links want larger pieces than the
  // default (python -m bps_tf.plan recommends one for a cluster); above 256 KiB also the most bytes of small
  // tensors it groups on one server.
  size_t min_spread_bytes = 65536;
  // Bytes being pushed at once per worker; 0 means unlimited. Unset (auto): unlimited when every server
  // is on this host (memory-bound); otherwise (network-bound) a few slices (kSlicesInFlight), or one
  // partition where partitions are not sliced, so that pushes cross the link in priority order and pulls of
  // early ones overlap pushes of later ones.
  std::optional<size_t> scheduling_credit;
  // An elastic job (BYTEPS_MIN_WORKERS / BYTEPS_MAX_WORKERS set): workers may leave and join while it runs
  // (docs/elastic.md). It starts with num_worker workers and goes on with min_workers..max_workers of them;
  // below min_workers it waits elastic_timeout_s (BYTEPS_ELASTIC_TIMEOUT) for workers, then fails. 0: not
  // elastic (a lost worker fails the job).
  int min_workers = 0;
  int max_workers = 0;
  double elastic_timeout_s = 600;
  // BYTEPS_SERVER_ENGINE_THREAD: threads that sum on each server (DefaultSumThreads() unless set).
  int server_sum_threads = 2;
  double timeout_s = 300;        // every wait on a peer gives up after this
  // BYTEPS_BACKUP_WORKERS: a round of a gradient's key completes with the first worker_processes() -
  // backup_workers pushes; later pushes of that round are dropped and answered with its sum
  // (docs/strategy.md, "Backup workers"). 0: every push is summed.
  int backup_workers = 0;
  // BYTEPS_BACKUP_WINDOW: completed rounds a worker may be behind; a server keeps that many rounds' sums
  // (and the latest) for late workers, and holds the next round until the slowest worker is within it.
  int backup_window = kDefaultBackupWindow;
  bool force_distributed = false;  // BYTEPS_FORCE_DISTRIBUTED: push/pull even with one worker machine
  // BYTEPS_GPU_DIRECT_COPIES: GPU push_pulls copy straight to a same-host server's memory (0: through the
  // pinned staging, the path before direct copies, to compare the two)
  bool gpu_direct_copies = true;
  // BYTEPS_SHARED_MEMORY: workers and servers on one host exchange tensors through the server's shared
  // memory (cc/common/shared_arena.h) instead of the transport.
  bool shared_memory = true;
  // BYTEPS_IN_PLACE_PUSHES: with shared memory, a worker whose large tensors lie in its shareable heap
  // (cc/common/shareable_heap.h, with jemalloc) lets the server read them and write the sum where they are
  // (0: every push is copied into the server's memory and its sum out of it).
  bool in_place_pushes = true;
  // BYTEPS_FUSION: a worker sends the small partitions to one server that are ready together as one message
  // (cc/ps/worker_operations.h); 0: each partition is a message of its own.
  bool fusion = true;
  // BYTEPS_TRACE_ON=1: every worker writes a trace of its tensors' stages to
  // BYTEPS_TRACE_DIR/<rank>/comm.json (cc/common/timeline.h) from init() until it leaves the job.
  bool trace_on = false;
  std::string trace_dir = ".";
  // Asynchronous training (BYTEPS_ENABLE_ASYNC=1, or BYTEPS_STALENESS set): the servers hold the weights and
  // workers push changes of them (cc/ps/async_store.h). Pushes then travel one message each over the transport
  // (no shared memory, no fusion). `staleness`: BYTEPS_STALENESS, how many steps a worker may lead the
  // slowest (-1: unbounded).
  bool async = false;
  int staleness = -1;

  static constexpr int kSlicesInFlight = 4;
  static constexpr int kDefaultBackupWindow = 4;

  int worker_processes() const { return num_worker * local_size; }
  bool elastic() const { return max_workers > 0; }
  // Whether data may travel over RDMA (DMLC_ENABLE_RDMA=1, or an RDMA transport listed), which changes how
  // partitions cross the network (whole, zero-copy rendezvous) from TCP's (slices, eager).
  bool rdma() const;
  int rank() const { return worker_id * local_size + local_rank; }

  // Errors name the variable and say how to fix it.
  static StatusOr<Config> FromEnvironment(const Environment& env);
};

// The cores this process may run on (its CPU affinity; a container's CPU set), at least 1: what the defaults
// of thread counts below and of BYTEPS_TCP_IO_THREADS follow.
int UsableCores();

// BYTEPS_SERVER_ENGINE_THREAD's default: the cores this process may run on (its CPU affinity), at least 1 and
// at most kMaxDefaultSumThreads. A server's sums are memory-bound: a few cores reach the memory's bandwidth.
constexpr int kMaxDefaultSumThreads = 16;
int DefaultSumThreads();

}  // namespace bps
