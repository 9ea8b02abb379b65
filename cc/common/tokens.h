// Random bytes from the kernel (getrandom) for nonces and membership tokens, and comparing such secrets
// without leaking through timing how much of a guess was right.
#pragma once

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "cc/common/status.h"

namespace bps {

inline void FillRandom(void* out, size_t length) {
  size_t filled = 0;
  while (filled < length) {
    ssize_t n = getrandom(static_cast<char*>(out) + filled, length - filled, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) DieBecause(std::string("getrandom failed: ") + std::strerror(errno));
    filled += static_cast<size_t>(n);
  }
}

inline std::string RandomBytes(size_t length) {
  std::string bytes(length, '\0');
  FillRandom(&bytes[0], length);
  return bytes;
}

inline bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < a.size(); ++i) difference |= static_cast<unsigned char>(a[i] ^ b[i]);
  return difference == 0;
}

}  // namespace bps
