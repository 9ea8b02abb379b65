#include "cc/runtime/engine.h"

#include <cstring>
#include <tuple>

#include "cc/common/clock.h"
#include "cc/common/communication_counters.h"
#include "cc/common/huge_pages.h"
#include "cc/common/logging.h"
#include "cc/common/process_set.h"
#include "cc/common/timeline.h"
#include "cc/compress/codec.h"

namespace bps {
namespace {

// Zeros stand for data in sums only.
// (A compressed push always goes out: with error feedback it carries more than this round's data.)
bool AllZeros(const PushPullRequest& request, const Partition& part) {
  return request.op == ReduceOp::kSum && !request.compression.on() &&
         (part.offset + part.count <= request.nonzero_begin || part.offset >= request.nonzero_end);
}

// Records a partition's stage from `begin` until now, when the timeline is on.
void TraceUntilNow(const std::string& tensor, const char* stage, double begin, const Partition& part) {
  Timeline& timeline = Timeline::OfProcess();
  if (!timeline.on()) return;
  timeline.Span(tensor, stage, begin, NowSeconds(),
                "partition at " + std::to_string(part.offset) + ", " + std::to_string(part.count) + " elements");
}

// What a partition's push puts on the wire, and so counts against the credit window.
size_t PushedBytes(const PushPullRequest& request, const Partition& part, DataType dtype) {
  if (request.compression.on()) return EncodedBytes(request.compression, part.count);
  return AllZeros(request, part) ? 0 : part.count * DataTypeSize(dtype);
}

// The pushes of the partitions this thread's Dispatch starts, gathered to leave fused (null outside one).
thread_local FusedPushes* t_fused = nullptr;

}  // namespace

PushPullRequest PushPullRequest::ForState(Kind kind, const TensorSpec& spec, std::shared_ptr<CompressionState> state,
                                          std::function<void(const Status&)> done) {
  PushPullRequest request;
  request.kind = kind;
  request.name = spec.name;
  request.dtype = spec.dtype;
  request.shape = spec.shape;
  request.scope = spec.scope;
  request.op = spec.op;
  request.members = spec.members;
  request.root = spec.root;
  request.compression = spec.compression;
  request.backups = spec.backups > 0;
  request.state = std::move(state);
  request.done = std::move(done);
  return request;
}

Engine::Engine(const Config& config, std::shared_ptr<WorkerClient> client)
    : config_(config), client_(std::move(client)), ready_(config.scheduling_credit.value_or(0)) {}

StatusOr<std::unique_ptr<Engine>> Engine::Start(const Config& config, std::unique_ptr<Transport> transport) {
  auto client = std::make_shared<WorkerClient>(config, transport.get());
  Status started = client->Start();
  if (!started.ok()) {
    transport->Shutdown(0);
    return started;
  }
  std::unique_ptr<Engine> engine = Start(config, std::move(client));
  engine->owned_transport_ = std::move(transport);
  return engine;
}

std::unique_ptr<Engine> Engine::Start(const Config& config, std::shared_ptr<WorkerClient> client) {
  std::unique_ptr<Engine> engine(new Engine(config, std::move(client)));
  engine->StartWatchdog();
  return engine;
}

void Engine::StartWatchdog() {
  if (!config_.scheduling_credit) {
    const size_t slice = client_->slice_bytes();
    const size_t across_hosts = slice > 0 ? Config::kSlicesInFlight * slice : config_.partition_bytes;
    ready_.set_credit_bytes(client_->AllServersOnThisHost() ? 0 : across_hosts);
  }
  watchdog_ = std::make_unique<WorkThread>([this] { client_->FailExpiredRequests(); });
}

// A destructor cannot report: callers that care call Shutdown() first (then this returns at once).
Engine::~Engine() { Shutdown().IgnoreError(); }

void Engine::Run(Callbacks& callbacks) {
  for (auto& fn : callbacks) fn();
  callbacks.clear();
}

TensorSpec Engine::SpecOf(const PushPullRequest& request) const {
  return TensorSpec{request.name,    request.dtype, request.shape,       request.scope,
                    request.op,      request.members, request.root,      request.compression,
                    request.backups ? config_.backup_workers : 0};
}

bool Engine::Describes(const TensorSpec& spec, const PushPullRequest& request) const {
  const int32_t backups = request.backups ? config_.backup_workers : 0;
  return spec.name == request.name &&
         spec.identity() == std::tie(request.dtype, request.shape, request.scope, request.op, request.members,
                                     request.root, request.compression, backups);
}

void Engine::Enqueue(PushPullRequest request) {
  const uint64_t elements = TensorSpec::ElementCount(request.shape);
  if (request.output != request.input) {
    // A separate output is usually fresh memory that the pulled sums fault in page by page.
    AdviseHugePages(request.output, elements * DataTypeSize(request.dtype));
  }
  request.enqueued_at = NowSeconds();
  if (request.mover != nullptr) {
    Status refused = CheckMover(request);
    if (!refused.ok()) return request.done(refused);
  }
  if (local_collectives_) {
    // (With a mover the data never left where it is, and `output` is `input`.)
    const size_t bytes = elements * DataTypeSize(request.dtype);
    if (request.kind == PushPullRequest::Kind::kPushPull && request.output != request.input && bytes > 0) {
      std::memcpy(request.output, request.input, bytes);
    }
    request.done(Status::OK());
    return;
  }
  Callbacks later;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (shut_down_) {
      auto done = request.done;
      later.push_back([done] { done(FailedPrecondition("bps_tf has been shut down; call init() first")); });
    } else {
      auto found = tensors_.find(request.name);
      if (found == tensors_.end()) {
        found = tensors_.emplace(request.name, Tensor()).first;
        found->second.spec = SpecOf(request);
        if (tensors_.size() == kManyNames) {
          BPS_LOG(Warning) << "this worker has used " << kManyNames << " distinct tensor names (the latest: '"
                           << request.name << "'); each keeps its plan and buffers on the workers and servers "
                           << "until shutdown(): give recurring tensors the same name every step";
        }
      }
      Tensor& tensor = found->second;
      if (!Describes(tensor.spec, request)) {  // (compared field by field: building the spec allocates)
        auto done = request.done;
        std::string message = "the name '" + request.name + "' is used for two different tensors: " +
                              tensor.spec.ToString() + " and " + SpecOf(request).ToString() +
                              "; give each tensor its own name.";
        later.push_back([done, message] { done(InvalidArgument(message)); });
      } else {
        tensor.queue.push_back(std::move(request));
        Advance(&tensor, &later);
      }
    }
  }
  Run(later);
  Dispatch();
}

// Starts the next request of a tensor when the tensor is idle, declaring it first if needed.
// Called with mu_ held; callbacks to run after unlocking go to `later`.
void Engine::Advance(Tensor* tensor, Callbacks* later) {
  if (tensor->busy || tensor->queue.empty()) return;
  if (abandoned_) return FailQueued(tensor, Abandoned(), later);
  if (!tensor->error.ok()) return FailQueued(tensor, tensor->error, later);
  if (!tensor->declared) {
    if (!tensor->declaring) {
      tensor->declaring = true;
      tensor->declaring_since = NowSeconds();
      TensorSpec spec = tensor->spec;
      later->push_back([this, tensor, spec] {
        client_->Declare(spec, Gated(gate_, [this, tensor](const StatusOr<PartitionPlan>& plan) {
                           OnDeclared(tensor, plan);
                         }));
      });
    }
    return;
  }
  auto* op = new Operation{tensor, std::move(tensor->queue.front()), tensor->plan.partitions.size(), Status::OK()};
  tensor->queue.pop_front();
  const double now = NowSeconds();
  // Waiting for the name's previous request, and for its declaration the first time.
  Timeline::OfProcess().Span(op->request.name, "QUEUE", op->request.enqueued_at, now);
  tensor->busy = true;
  active_operations_++;
  Track(op);
  if (op->request.kind != PushPullRequest::Kind::kPushPull) {
    op->remaining = 1;  // this worker's part; MoveCompressionState adds the servers'
    later->push_back([this, op] { MoveCompressionState(op); });
    return;
  }
  tensor->round++;
  if (op->remaining == 0) {  // an empty tensor: nothing to move
    later->push_back([this, op] { FinishPartition(op, Status::OK()); });
    op->remaining = 1;
    return;
  }
  for (const Partition& part : tensor->plan.partitions) {
    size_t bytes = PushedBytes(op->request, part, tensor->spec.dtype);
    ready_.Add(ReadyPartition{op->request.priority, part.key, bytes,
                              [this, op, part, now] { StartPartition(op, part, now); }});
  }
}

void Engine::FailQueued(Tensor* tensor, const Status& why, Callbacks* later) {
  for (auto& request : tensor->queue) {
    auto done = request.done;
    later->push_back([done, why] { done(why); });
  }
  tensor->queue.clear();
}

void Engine::OnDeclared(Tensor* tensor, const StatusOr<PartitionPlan>& plan) {
  Callbacks later;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tensor->declaring = false;
    Timeline::OfProcess().Span(tensor->spec.name, "DECLARE", tensor->declaring_since, NowSeconds());
    if (plan.ok()) {
      tensor->declared = true;
      tensor->plan = plan.value();
      if (tensor->spec.compression.on()) {
        for (const Partition& part : tensor->plan.partitions) {
          tensor->compressors[part.key] =
              std::make_unique<PartitionCompressor>(tensor->spec.compression, part.key, part.count);
        }
      }
    } else {
      tensor->error = plan.status();
    }
    Advance(tensor, &later);
  }
  Run(later);
  Dispatch();
}

void Engine::Dispatch() {
  std::vector<ReadyPartition> startable;
  {
    std::lock_guard<std::mutex> lock(mu_);
    startable = ready_.TakeStartable();
  }
  if (startable.empty()) return;
  // Partitions that became startable together are pushed together: those to one server in one message,
  // in priority order. Nothing waits for partitions that are not ready yet.
  FusedPushes fused;
  FusedPushes* outer = t_fused;
  t_fused = &fused;
  for (ReadyPartition& part : startable) part.start();
  t_fused = outer;
  client_->SendFused(&fused);
}

void Engine::StartPartition(Operation* op, const Partition& part, double queued_at) {
  if (abandoned_) {  // (taken from the queue just before a shutdown gave up)
    ReleaseCredit(PushedBytes(op->request, part, op->tensor->spec.dtype));
    return FinishPartition(op, Abandoned());
  }
  const DataType dtype = op->tensor->spec.dtype;
  const size_t element = DataTypeSize(dtype);
  const bool all_zeros = AllZeros(op->request, part);
  const size_t bytes = PushedBytes(op->request, part, dtype);
  const uint32_t round = op->tensor->round;
  const char* input = all_zeros ? nullptr : static_cast<const char*>(op->request.input) + part.offset * element;
  char* output = static_cast<char*>(op->request.output) + part.offset * element;
  const TensorSpec& spec = op->tensor->spec;
  const int index = ContributionIndex(spec.scope, spec.members, spec.root, rank(), config_.local_size);
  const double started = NowSeconds();
  // The partition waited for its turn by priority under the credit window.
  TraceUntilNow(spec.name, "SCHEDULE", queued_at, part);
  if (index == kReader) {
    ReleaseCredit(bytes);
    op->in_client++;
    return client_->Fetch(part, round, dtype, output, Gated(gate_, [this, op, part, started](const Status& status) {
                            op->in_client--;
                            TraceUntilNow(op->request.name, "FETCH", started, part);
                            FinishPartition(op, status);
                          }));
  }
  if (index == kOutsider) {
    ReleaseCredit(bytes);
    return FinishPartition(op, CheckInProcessSet(spec.members, rank(), "'" + spec.name + "' (" + spec.ToString() + ")"));
  }
  const int count = ContributorCount(spec);
  if (spec.compression.on()) return PushPullCompressed(op, part, Participant{index, count}, input, output, bytes, started);
  auto sent_at = std::make_shared<double>(started);
  op->in_client++;
  // The credit covers the push only: the sum waits on the other workers, and holding credit across that
  // wait would let two workers that started different tensors first wait on each other forever.
  client_->PushPull(
      part, round, Participant{index, count}, dtype, input, output,
      // (May run after `op` is gone. The tensor's name stays as long as the engine: not copied per push.)
      Gated(gate_, [this, bytes, name = &spec.name, part, started, sent_at] {
        *sent_at = NowSeconds();
        TraceUntilNow(*name, "PUSH", started, part);
        ReleaseCredit(bytes);
      }),
      Gated(gate_, [this, op, part, sent_at](const Status& status) {
        op->in_client--;
        // The server's sum, waiting for the other workers' pushes, and the pull of the result.
        TraceUntilNow(op->request.name, "SUM_PULL", *sent_at, part);
        FinishPartition(op, status);
      }),
      config_.fusion && op->request.mover == nullptr ? t_fused : nullptr, op->request.mover,
      op->request.in_place);
}

Status Engine::CheckMover(const PushPullRequest& request) {
  std::string why;
  if (request.kind != PushPullRequest::Kind::kPushPull) why = "it saves or loads compression state";
  else if (request.compression.on()) why = "it is compressed";
  else if (request.scope == TensorScope::kPublished) why = "it is a published tensor (broadcast)";
  else if (!request.members.empty()) why = "it is reduced within a process set";
  else if (request.nonzero_begin != 0 || request.nonzero_end != UINT64_MAX) why = "it declares a nonzero range";
  else if (request.input != request.output) why = "its input and output staging differ";
  if (why.empty()) return Status::OK();
  return InvalidArgument("push_pull of '" + request.name + "' moves its data through a DataMover (a GPU tensor), "
                         "which serves plain sums of whole tensors only, but " + why +
                         "; push_pull it from host memory instead");
}

void Engine::PushPullCompressed(Operation* op, const Partition& part, Participant me, const char* input, char* output,
                                size_t bytes, double started) {
  PartitionCompressor* compressor = op->tensor->compressors.at(part.key).get();
  const uint32_t round = op->tensor->round;
  compressor->Compress(reinterpret_cast<const float*>(input), round);
  TraceUntilNow(op->request.name, "COMPRESS", started, part);
  auto sent_at = std::make_shared<double>(NowSeconds());
  op->in_client++;
  client_->PushPullEncoded(
      part, round, me, compressor->encoded_push(), compressor->encoded_sum(), compressor->encoded_bytes(),
      Gated(gate_, [this, bytes, name = op->request.name, part, sent_at] {  // (may run after `op` is gone)
        const double pushed_from = *sent_at;
        *sent_at = NowSeconds();
        TraceUntilNow(name, "PUSH", pushed_from, part);
        ReleaseCredit(bytes);
      }),
      Gated(gate_, [this, op, part, sent_at, compressor, output, round](Status status) {
        op->in_client--;
        TraceUntilNow(op->request.name, "SUM_PULL", *sent_at, part);
        const double decoding = NowSeconds();
        if (status.ok()) status = compressor->Decompress(reinterpret_cast<float*>(output), round);
        TraceUntilNow(op->request.name, "DECOMPRESS", decoding, part);
        FinishPartition(op, status);
      }));
}

int Engine::ContributorCount(const TensorSpec& spec) const {
  return spec.scope == TensorScope::kMachine ? size() / config_.local_size
         : spec.scope == TensorScope::kPublished ? 1
         : spec.members.empty() ? size() : static_cast<int>(spec.members.size());
}

std::vector<TensorSpec> Engine::CompressedTensors() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TensorSpec> specs;
  for (const auto& entry : tensors_) {
    if (entry.second.declared && entry.second.spec.compression.on()) specs.push_back(entry.second.spec);
  }
  return specs;
}

// The tensor is busy with this request, so no partition flow touches its compressors meanwhile.
void Engine::MoveCompressionState(Operation* op) {
  Tensor* tensor = op->tensor;
  const TensorSpec& spec = tensor->spec;
  if (!spec.compression.on()) {
    return FinishPartition(op, FailedPrecondition("'" + spec.name + "' is not compressed: it has no state to move"));
  }
  CompressionState& state = *op->request.state;
  const bool save = op->request.kind == PushPullRequest::Kind::kSaveState;
  // The server's residual is the same for every contributor: the first one saves it.
  const Participant me{ContributionIndex(spec.scope, spec.members, spec.root, rank(), config_.local_size),
                       ContributorCount(spec)};
  const bool with_server =
      spec.compression.error_feedback && me.index >= 0 && (save ? me.index == 0 : !state.server_residual.empty());
  if (save) state = CompressionState::Empty(spec, with_server);
  for (const Partition& part : tensor->plan.partitions) {
    PartitionCompressor* compressor = tensor->compressors.at(part.key).get();
    if (save) {
      compressor->SaveState(part.offset, state.momentum.data(), state.carried.data());
    } else {
      compressor->LoadState(part.offset, state.momentum.data(), state.carried.data());
    }
  }
  if (with_server) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      op->remaining += tensor->plan.partitions.size();
    }
    for (const Partition& part : tensor->plan.partitions) {
      float* residual = state.server_residual.data() + part.offset;
      op->in_client++;
      auto done = Gated(gate_, [this, op](const Status& status) {
        op->in_client--;
        FinishPartition(op, status);
      });
      if (save) {
        client_->SaveResidual(part, me, residual, done);
      } else {
        client_->LoadResidual(part, me, residual, done);
      }
    }
  }
  FinishPartition(op, Status::OK());
}

void Engine::ReleaseCredit(size_t bytes) {
  bool waiting;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ready_.Release(bytes);
    waiting = ready_.waiting() > 0;  // (whoever adds a partition dispatches it)
  }
  if (waiting) Dispatch();
}

void Engine::FinishPartition(Operation* op, const Status& status) {
  Callbacks later;
  bool waiting;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!status.ok() && op->status.ok()) {
      const char* what = op->request.kind == PushPullRequest::Kind::kPushPull    ? "push_pull"
                         : op->request.kind == PushPullRequest::Kind::kSaveState ? "saving the compression state"
                                                                                 : "loading the compression state";
      op->status = Status(status.code(), std::string(what) + " of tensor '" + op->request.name + "': " +
                                             status.message());
    }
    if (--op->remaining == 0) {
      if (op->request.kind == PushPullRequest::Kind::kPushPull) {
        CommunicationCounters::OfProcess().PushPullEnded(op->request.enqueued_at);
      }
      Tensor* tensor = op->tensor;
      tensor->busy = false;
      later.push_back([done = std::move(op->request.done), result = std::move(op->status)] { done(result); });
      Untrack(op);
      delete op;
      Advance(tensor, &later);
      active_operations_--;
      idle_.notify_all();
    }
    waiting = ready_.waiting() > 0;  // (partitions the next request added, or that wait for credit)
  }
  Run(later);
  if (waiting) Dispatch();
}

Status Engine::Shutdown() { return Finish(false).status(); }

StatusOr<int> Engine::Join() { return Finish(true); }

StatusOr<int> Engine::Finish(bool joined) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (shut_down_) {
      if (joined) return FailedPrecondition("join() after this generation ended");
      return -1;
    }
    shut_down_ = true;
    bool idle = idle_.wait_for(lock, std::chrono::duration<double>(config_.timeout_s),
                               [this] { return active_operations_ == 0; });
    if (!idle) {
      BPS_LOG(Warning) << "shutting down with " << active_operations_ << " push_pulls unfinished";
    }
    // What has not started by now does not: queued requests fail, waiting partitions are dropped.
    abandoned_ = true;
    ready_.Clear();
  }
  const Status why = Abandoned();
  client_->FinishMoves();  // the GPU copies under way, and their callbacks into this engine
  StatusOr<int> finished = client_->EndGeneration(joined);
  if (watchdog_) watchdog_->Stop();
  if (owned_transport_) owned_transport_->Shutdown(1);
  client_->FinishMoves();  // what a late reply handed them before the transport stopped
  // The client's requests fail (answered through the gate, which is still open).
  client_->FailRequests(why);
  if (!gate_->Close(config_.timeout_s)) {
    // Completing requests now could complete one twice: left as they are.
    BPS_LOG(Error) << "a callback into bps_tf's engine has not returned within BYTEPS_TIMEOUT; shutting down "
                   << "without completing the requests left";
    return finished;
  }
  const size_t left = FailUnfinished(why);
  if (left > 0) {
    BPS_LOG(Error) << left << " push_pulls are left unfinished: the connections still use their memory";
    // Nor is the engine's memory they use freed (a compressed push sends from its compressor's buffers):
    // the tensors are kept, on purpose, for the rest of the process.
    new std::map<std::string, Tensor>(std::move(tensors_));
  }
  return finished;
}

Status Engine::Abandoned() {
  return Aborted("bps_tf shut down before this request completed (shutdown() waits up to BYTEPS_TIMEOUT for "
                 "those in flight): wait for every push_pull before shutdown(), and look for an error on the "
                 "other workers");
}

void Engine::Track(Operation* op) {
  op->next = operations_;
  if (operations_ != nullptr) operations_->previous = op;
  operations_ = op;
}

void Engine::Untrack(Operation* op) {
  if (op->previous != nullptr) op->previous->next = op->next;
  else operations_ = op->next;
  if (op->next != nullptr) op->next->previous = op->previous;
}

size_t Engine::FailUnfinished(const Status& why) {
  Callbacks later;
  size_t left = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Operation* op = operations_; op != nullptr;) {
      Operation* next = op->next;
      if (op->in_client.load() > 0) {
        ++left;  // its memory may still be written or sent from: never completed, so the caller keeps it
      } else {
        Untrack(op);
        later.push_back([done = std::move(op->request.done), why] { done(why); });
        delete op;
        active_operations_--;
      }
      op = next;
    }
    for (auto& entry : tensors_) FailQueued(&entry.second, why, &later);
  }
  Run(later);
  return left;
}

}  // namespace bps
