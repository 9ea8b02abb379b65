#include "cc/compress/compression_spec.h"

#include <cmath>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace bps {
namespace {

const char* KindName(CodecKind kind) {
  switch (kind) {
    case CodecKind::kNone: return "none";
    case CodecKind::kOneBit: return "onebit";
    case CodecKind::kTopK: return "topk";
    case CodecKind::kRandomK: return "randomk";
  }
  return "?";
}

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, separator)) parts.push_back(part);
  return parts;
}

bool ParseFloat(const std::string& text, float* value) {
  if (text.empty()) return false;
  char* end = nullptr;
  *value = std::strtof(text.c_str(), &end);
  return end == text.c_str() + text.size() && std::isfinite(*value);
}

Status Unreadable(const std::string& text, const std::string& why) {
  return InvalidArgument("compression '" + text + "': " + why +
                         ". Write none, onebit, topk:RATIO or randomk:RATIO (RATIO in (0, 1]), optionally "
                         "followed by ,momentum=M (0 <= M < 1) and ,ef=0 (no error feedback)");
}

}  // namespace

std::string CompressionSpec::ToString() const {
  std::string s = KindName(kind);
  if (!on()) return s;
  std::vector<std::string> options;
  if (kind == CodecKind::kTopK || kind == CodecKind::kRandomK) options.push_back("ratio=" + std::to_string(ratio));
  if (momentum != 0) options.push_back("momentum=" + std::to_string(momentum));
  if (!error_feedback) options.push_back("no error feedback");
  for (size_t i = 0; i < options.size(); ++i) s += (i == 0 ? "(" : ", ") + options[i];
  return options.empty() ? s : s + ")";
}

Status CompressionSpec::Validate() const {
  if (static_cast<uint8_t>(kind) > static_cast<uint8_t>(CodecKind::kRandomK)) {
    return InvalidArgument("unknown compression kind " + std::to_string(static_cast<int>(kind)));
  }
  if (!(ratio > 0 && ratio <= 1)) return InvalidArgument("a compression ratio lies in (0, 1]");
  if (!(momentum >= 0 && momentum < 1)) return InvalidArgument("compression momentum lies in [0, 1)");
  return Status::OK();
}

StatusOr<CompressionSpec> CompressionSpec::Parse(const std::string& text) {
  CompressionSpec spec;
  std::vector<std::string> parts = Split(text, ',');
  if (parts.empty() || parts[0].empty() || parts[0] == "none") {
    if (parts.size() > 1) return Unreadable(text, "options need a compressor");
    return spec;
  }
  std::vector<std::string> head = Split(parts[0], ':');
  const std::string& name = head[0];
  if (name == "onebit") {
    spec.kind = CodecKind::kOneBit;
    if (head.size() != 1) return Unreadable(text, "onebit takes no ratio");
  } else if (name == "topk" || name == "randomk") {
    spec.kind = name == "topk" ? CodecKind::kTopK : CodecKind::kRandomK;
    if (head.size() != 2 || !ParseFloat(head[1], &spec.ratio)) return Unreadable(text, name + " needs a ratio");
  } else {
    return Unreadable(text, "unknown compressor '" + name + "'");
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    std::vector<std::string> option = Split(parts[i], '=');
    if (option.size() != 2) return Unreadable(text, "options are written name=value");
    float value = 0;
    if (!ParseFloat(option[1], &value)) return Unreadable(text, "'" + option[1] + "' is no number");
    if (option[0] == "momentum") {
      spec.momentum = value;
    } else if (option[0] == "ef" && (value == 0 || value == 1)) {
      spec.error_feedback = value == 1;
    } else {
      return Unreadable(text, "unknown option '" + parts[i] + "'");
    }
  }
  Status valid = spec.Validate();
  if (!valid.ok()) return Unreadable(text, valid.message());
  return spec;
}

}  // namespace bps
