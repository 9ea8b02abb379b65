#include "cc/runtime/compression_state.h"

#include <cstring>

#include "cc/common/wire.h"

namespace bps {
namespace {

constexpr uint32_t kMagic = 0x53435042;  // "BPCS" read little-endian
constexpr uint32_t kVersion = 1;

void PutFloats(WireWriter& w, const std::vector<float>& values) {
  w.PutString(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
}

bool GetFloats(WireReader& r, std::vector<float>* values) {
  const std::string bytes = r.GetString();
  if (r.failed() || bytes.size() % sizeof(float) != 0) return false;
  values->resize(bytes.size() / sizeof(float));
  std::memcpy(values->data(), bytes.data(), bytes.size());
  return true;
}

}  // namespace

CompressionState CompressionState::Empty(const TensorSpec& spec, bool with_server) {
  CompressionState state;
  state.spec = spec;
  const uint64_t n = spec.num_elements();
  const CompressionSpec& c = spec.compression;
  if (c.momentum != 0) state.momentum.assign(n, 0.f);
  if (c.error_feedback) state.carried.assign(n, 0.f);
  if (c.error_feedback && with_server) state.server_residual.assign(n, 0.f);
  return state;
}

std::string CompressionState::Encode() const {
  WireWriter w;
  w.Put<uint32_t>(kMagic);
  w.Put<uint32_t>(kVersion);
  w.PutString(spec.Encode());
  PutFloats(w, momentum);
  PutFloats(w, carried);
  PutFloats(w, server_residual);
  return w.Take();
}

StatusOr<CompressionState> CompressionState::Decode(const std::string& bytes) {
  const Status damaged = InvalidArgument("not a bps_tf compression state, or a damaged one");
  WireReader r(bytes);
  if (r.Get<uint32_t>() != kMagic || r.failed()) return damaged;
  const uint32_t version = r.Get<uint32_t>();
  if (version != kVersion) {
    return InvalidArgument("a compression state of format " + std::to_string(version) + "; this bps_tf reads " +
                           std::to_string(kVersion));
  }
  auto spec = TensorSpec::Decode(r.GetString());
  if (r.failed() || !spec.ok()) return damaged;
  CompressionState state;
  state.spec = spec.value();
  BPS_RETURN_IF_ERROR(state.spec.Validate());
  if (!GetFloats(r, &state.momentum) || !GetFloats(r, &state.carried) || !GetFloats(r, &state.server_residual)) {
    return damaged;
  }
  const CompressionSpec& c = state.spec.compression;
  const uint64_t n = state.spec.num_elements();
  const bool sizes_fit = c.on() && state.momentum.size() == (c.momentum != 0 ? n : 0) &&
                         state.carried.size() == (c.error_feedback ? n : 0) &&
                         (state.server_residual.empty() || (c.error_feedback && state.server_residual.size() == n));
  if (!sizes_fit) return InvalidArgument("the compression state of '" + state.spec.name + "' does not fit its tensor");
  return state;
}

}  // namespace bps
