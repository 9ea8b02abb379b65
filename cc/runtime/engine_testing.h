// Test support for engine tests: requests enqueued on an engine, their results as futures.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "cc/reducer/test_data.h"
#include "cc/runtime/engine.h"

namespace bps {
namespace testing {

// `r` enqueued on `engine`; its result as a future.
inline std::future<Status> Submit(Engine& engine, PushPullRequest r) {
  auto done = std::make_shared<std::promise<Status>>();
  auto result = done->get_future();
  r.done = [done](const Status& s) { done->set_value(s); };
  engine.Enqueue(std::move(r));
  return result;
}

inline std::future<Status> PushPull(Engine& engine, const std::string& name, DataType dtype, std::vector<int64_t> shape,
                             const void* in, void* out, int priority = 0,
                             TensorScope scope = TensorScope::kProcess) {
  PushPullRequest r;
  r.name = name;
  r.dtype = dtype;
  r.shape = std::move(shape);
  r.input = in;
  r.output = out;
  r.priority = priority;
  r.scope = scope;
  return Submit(engine, std::move(r));
}

// A request with everything a collective may set.
inline std::future<Status> Collective(Engine& engine, const std::string& name, DataType dtype, std::vector<int64_t> shape,
                               const void* in, void* out, ReduceOp op, std::vector<int32_t> members = {},
                               TensorScope scope = TensorScope::kProcess, int32_t root = 0) {
  PushPullRequest r;
  r.name = name;
  r.dtype = dtype;
  r.shape = std::move(shape);
  r.input = in;
  r.output = out;
  r.op = op;
  r.members = std::move(members);
  r.scope = scope;
  r.root = root;
  return Submit(engine, std::move(r));
}

inline Status Await(std::future<Status>& f, double seconds = 30) {
  if (f.wait_for(std::chrono::duration<double>(seconds)) != std::future_status::ready) {
    return DeadlineExceeded("test gave up waiting");
  }
  return f.get();
}

// Element `i` of `bytes` in `dtype`, as a double.
inline double Read(DataType dtype, const std::vector<char>& bytes, uint64_t i) {
  return test_data::Read(dtype, bytes.data() + i * DataTypeSize(dtype));
}

}  // namespace testing
}  // namespace bps
