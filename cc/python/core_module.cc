// bps_tf._core: the framework-neutral Python door to the core. NumPy arrays come in as arrays (their
// addresses read here); the Python wrapper (bps_tf/numpy.py) keeps them alive until their push_pull completes.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "cc/common/clock.h"
#include "cc/common/communication_counters.h"
#include "cc/common/kept_after_failure.h"
#include "cc/common/process_set.h"
#include "cc/common/timeline.h"
#include "cc/ps/partition_planner.h"
#include "cc/python/handles.h"
#include "cc/runtime/process_engine.h"

namespace py = pybind11;

namespace bps {
namespace {

HandleTable g_handles;

[[noreturn]] void Raise(const Status& status) {
  switch (status.code()) {
    case Code::kInvalidArgument: throw py::value_error(status.message());
    case Code::kDeadlineExceeded: {
      PyErr_SetString(PyExc_TimeoutError, status.message().c_str());
      throw py::error_already_set();
    }
    default: throw std::runtime_error(status.message());
  }
}

void Check(const Status& status) {
  if (!status.ok()) Raise(status);
}

std::shared_ptr<Engine> RequireEngine() {
  std::shared_ptr<Engine> engine = ProcessEngine();
  if (engine == nullptr) {
    throw std::runtime_error("bps_tf is not initialised: call bps_tf.init() first (in a process started by bpslaunch)");
  }
  return engine;
}

DataType ParseDtype(const std::string& name) {
  for (int i = 0; i < kNumDataTypes; ++i) {
    if (name == DataTypeName(static_cast<DataType>(i))) return static_cast<DataType>(i);
  }
  throw py::value_error("unsupported dtype '" + name +
                        "': push_pull supports float16, bfloat16, float32, float64, int32 and int64");
}

// `input` and `output`: C-contiguous arrays of one shape and of `dtype` (bps_tf/numpy.py checks them); the
// caller keeps them alive until the handle completes. Taken as arrays, not addresses: reading an array's
// address in Python costs more than the rest of a small push_pull's call. `options`: None for a plain sum
// over every worker, else (op, process_set, backups). (Six arguments at most: pybind11 gathers more on the
// heap.)
int64_t PushPullAsync(const py::array& input, py::array& output, const std::string& dtype, std::string name,
                      int priority, const py::object& options) {
  std::shared_ptr<Engine> engine = RequireEngine();
  if (name.empty()) throw py::value_error("push_pull needs a non-empty tensor name");
  PushPullRequest request;
  if (!options.is_none()) {
    auto [op, process_set, backups] = options.cast<std::tuple<std::string, std::vector<int32_t>, bool>>();
    if (!ParseReduceOp(op, &request.op)) {
      throw py::value_error("unknown op '" + op + "': use sum, min, max, product or weights");
    }
    if (!process_set.empty()) {  // (every worker is in the empty set: no error text to build)
      const Status member = CheckInProcessSet(process_set, engine->rank(), "push_pull of '" + name + "'");
      if (!member.ok()) throw py::value_error(member.message());
    }
    request.members = std::move(process_set);
    request.backups = backups;
  }
  request.name = std::move(name);
  request.dtype = ParseDtype(dtype);
  request.shape.assign(input.shape(), input.shape() + input.ndim());
  request.input = input.data();
  request.output = output.mutable_data();
  request.priority = priority;
  HandleTable::Added added = g_handles.Add();
  request.done = [completion = added.completion](const Status& s) { completion->Set(s); };
  engine->Enqueue(std::move(request));
  return added.handle;
}

bool Poll(int64_t handle) {
  auto completion = g_handles.Get(handle);
  if (!completion) throw py::value_error("unknown push_pull handle " + std::to_string(handle));
  return completion->Done();
}

// Waits in short slices so Ctrl-C reaches Python; the engine itself guarantees completion within
// BYTEPS_TIMEOUT, the outer limit only guards against a bug there.
void Await(const std::shared_ptr<Completion>& completion) {
  if (completion->Done()) return;  // (often, with many in flight: then the GIL is not released and taken again)
  std::shared_ptr<Engine> engine = ProcessEngine();
  double limit = (engine ? engine->config().timeout_s : 300) + 60;
  engine.reset();  // not held while waiting: a shutdown meanwhile must not wait for us
  Deadline deadline(limit);
  while (true) {
    bool done;
    {
      py::gil_scoped_release release;
      done = completion->WaitFor(0.2);
    }
    if (done) break;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (deadline.expired()) throw std::runtime_error("push_pull did not complete; this is a bug in bps_tf");
  }
}

void Wait(int64_t handle) {
  Status status;
  {
    auto completion = g_handles.Get(handle);
    if (!completion) throw py::value_error("unknown push_pull handle " + std::to_string(handle));
    Await(completion);
    status = completion->status;
  }  // (not held while removed: a completion nobody else holds is recycled)
  g_handles.Remove(handle);
  Check(status);
}

// Saves or loads compression states, each in order with its tensor's push_pulls; waits for all of them.
void MoveCompressionStates(Engine& engine, PushPullRequest::Kind kind,
                           const std::vector<std::shared_ptr<CompressionState>>& states) {
  std::vector<std::shared_ptr<Completion>> completions;
  for (const auto& state : states) {
    auto completion = std::make_shared<Completion>();
    completions.push_back(completion);
    engine.Enqueue(PushPullRequest::ForState(kind, state->spec, state,
                                             [completion](const Status& s) { completion->Set(s); }));
  }
  for (const auto& completion : completions) Await(completion);
  for (const auto& completion : completions) Check(completion->status);
}

// This worker's compression state of every tensor pushed compressed so far (cc/runtime/compression_state.h).
std::vector<py::bytes> SaveCompressionStates() {
  std::shared_ptr<Engine> engine = RequireEngine();
  std::vector<std::shared_ptr<CompressionState>> states;
  for (const TensorSpec& spec : engine->CompressedTensors()) {
    states.push_back(std::make_shared<CompressionState>());
    states.back()->spec = spec;
  }
  MoveCompressionStates(*engine, PushPullRequest::Kind::kSaveState, states);
  std::vector<py::bytes> saved;
  for (const auto& state : states) saved.emplace_back(state->Encode());
  return saved;
}

void LoadCompressionStates(const std::vector<std::string>& saved) {
  std::shared_ptr<Engine> engine = RequireEngine();
  std::vector<std::shared_ptr<CompressionState>> states;
  for (const std::string& bytes : saved) {
    StatusOr<CompressionState> state = CompressionState::Decode(bytes);
    Check(state.status());
    states.push_back(std::make_shared<CompressionState>(std::move(state.value())));
  }
  MoveCompressionStates(*engine, PushPullRequest::Kind::kLoadState, states);
}

// The scheduler's plan of float32 tensors of `element_counts`, planned in that order: per tensor its slices'
// (server, elements). Lets tests hold bps_tf.plan's mirror of the planner to the planner itself.
std::vector<std::vector<std::pair<int, uint64_t>>> PlanPartitions(int num_servers, size_t partition_bytes,
                                                                   size_t slice_bytes,
                                                                   const std::vector<int64_t>& element_counts,
                                                                   uint64_t min_spread_bytes) {
  PartitionPlanner planner(num_servers, partition_bytes, min_spread_bytes);
  planner.set_slice_bytes(slice_bytes);
  std::vector<std::vector<std::pair<int, uint64_t>>> plans;
  for (size_t i = 0; i < element_counts.size(); ++i) {
    auto plan = planner.Plan(TensorSpec{"t" + std::to_string(i), DataType::kFloat32, {element_counts[i]}});
    Check(plan.status());
    plans.emplace_back();
    for (const Partition& p : plan.value().partitions) plans.back().emplace_back(p.server, p.count);
  }
  return plans;
}

}  // namespace
}  // namespace bps

PYBIND11_MODULE(_core, m) {
  using namespace bps;
  m.doc() =
      "bps_tf core: parameter-server push_pull over bps_tf's authenticated TCP transport (UCX for RDMA, or with "
      "BYTEPS_TRANSPORT=ucx)";
  m.def("init", [] {
    py::gil_scoped_release release;
    Status s = InitProcessEngine();
    py::gil_scoped_acquire acquire;
    Check(s);
  });
  m.def("shutdown", [] {
    Status s;
    {
      py::gil_scoped_release release;
      s = ShutdownProcessEngine();
    }
    Check(s);
  });
  m.def("join", [] {
    StatusOr<int> last = -1;
    {
      py::gil_scoped_release release;
      last = JoinProcessEngine();
    }
    Check(last.status());
    return last.value();
  });
  m.def("start_timeline", [](const std::string& path) {
    Check(Timeline::OfProcess().Start(path, RequireEngine()->rank()));
  });
  m.def("stop_timeline", [] { Timeline::OfProcess().Stop(); });
  m.def("communication_counters", [] {
    const CommunicationTotals totals = CommunicationCounters::OfProcess().Totals();
    py::dict counters;
    counters["push_pull_seconds"] = totals.push_pull_seconds;
    counters["wait_seconds"] = totals.wait_seconds;
    counters["bytes_pushed"] = totals.bytes_pushed;
    counters["bytes_pulled"] = totals.bytes_pulled;
    counters["uncompressed_bytes_pushed"] = totals.uncompressed_bytes_pushed;
    counters["messages_sent"] = totals.messages_sent;
    counters["messages_received"] = totals.messages_received;
    counters["messages_sent_to_server"] = totals.messages_sent_to_server;
    counters["late_pushes"] = totals.late_pushes;
    counters["bytes_pushed_in_place"] = totals.bytes_pushed_in_place;
    counters["rounds_behind"] = totals.rounds_behind;
    counters["bytes_kept_after_failure"] = KeptAfterFailure::OfProcess().bytes();
    return counters;
  });
  m.def("plan_partitions", &PlanPartitions, py::arg("num_servers"), py::arg("partition_bytes"),
        py::arg("slice_bytes"), py::arg("element_counts"),
        py::arg("min_spread_bytes") = PartitionPlanner::kDefaultMinSpreadBytes);
  m.def("leave", [] {
    Status s;
    {
      py::gil_scoped_release release;
      s = LeaveJob();
    }
    Check(s);
  });
  m.def("abort", [](const std::string& why) {
    py::gil_scoped_release release;
    AbortJob(why);
  });
  m.def("elastic_state", [] {
    ElasticState state;
    {
      py::gil_scoped_release release;  // may wait a moment for news of a lost connection
      state = ProcessElasticState();
    }
    py::dict result;
    result["elastic"] = state.elastic;
    result["generation"] = state.generation;
    result["workers_waiting"] = state.workers_waiting;
    result["servers"] = state.servers;
    result["membership_changed"] = state.membership_changed;
    result["local_collectives"] = state.local_collectives;
    return result;
  });
  m.def("set_local_collectives", [](bool on) { SetLocalCollectives(on); });
  m.def("is_initialized", [] { return ProcessEngine() != nullptr; });
  m.def("rank", [] { return RequireEngine()->rank(); });
  m.def("size", [] { return RequireEngine()->size(); });
  m.def("local_rank", [] { return RequireEngine()->local_rank(); });
  m.def("local_size", [] { return RequireEngine()->local_size(); });
  // BYTEPS_ENABLE_ASYNC / BYTEPS_STALENESS as this process parsed them (staleness -1: unbounded).
  m.def("training_mode", [] {
    const Config& config = RequireEngine()->config();
    py::dict result;
    result["async"] = config.async;
    result["staleness"] = config.staleness;
    return result;
  });
  // Between an elastic job's generations there is no engine; such jobs have no backup workers.
  m.def("backup_workers", [] {
    std::shared_ptr<Engine> engine = ProcessEngine();
    return engine ? engine->config().backup_workers : 0;
  });
  m.def("validate_environment", [] { Check(ValidateEnvironment()); });
  m.def("run_role", [] {
    Status s;
    {
      py::gil_scoped_release release;
      s = RunServiceRole();
    }
    if (!s.ok()) throw std::runtime_error(s.message());
  });
  m.def("push_pull_async", &PushPullAsync, py::arg("input"), py::arg("output"), py::arg("dtype"),
        py::arg("name"), py::arg("priority") = 0, py::arg("options") = py::none());
  m.def("poll", &Poll);
  m.def("wait", &Wait);
  m.def("save_compression_states", &SaveCompressionStates);
  m.def("load_compression_states", &LoadCompressionStates);
}
