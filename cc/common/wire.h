// Little-endian encoding of message headers: append fields in order, read them back in the same order.
// Fields are copied in host order, which is little-endian wherever bps_tf builds (checked below), so every
// peer reads the same bytes the same way.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace bps {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the wire format is little-endian: port WireWriter first");

class WireWriter {
 public:
  WireWriter() = default;
  // `bytes`: what will be put, allocated at once (growing piece by piece reallocates several times).
  explicit WireWriter(size_t bytes) { out_.reserve(bytes); }

  template <typename T>
  void Put(T value) {
    static_assert(std::is_trivially_copyable<T>::value, "plain values only");
    out_.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  void PutString(const std::string& s) {
    Put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads fields; any read past the end sets failed() instead of crashing (headers come from the network).
class WireReader {
 public:
  explicit WireReader(const std::string& in) : data_(in.data()), size_(in.size()) {}

  template <typename T>
  T Get() {
    T value{};
    if (!Has(sizeof(T))) return value;
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  std::string GetString() {
    uint32_t n = Get<uint32_t>();
    if (!Has(n)) return std::string();
    std::string s(data_ + pos_, n);
    pos_ += n;
    return s;
  }
  bool failed() const { return failed_; }

 private:
  bool Has(size_t n) {
    if (failed_ || size_ - pos_ < n) {
      failed_ = true;
      return false;
    }
    return true;
  }
  const char* data_;
  size_t size_;
  size_t pos_ = 0;
  bool failed_ = false;
};

}  // namespace bps
