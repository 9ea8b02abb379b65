// Test support: a plain blocking socket connected to a transport's listener, for speaking to it as a stranger
// (or a hand-written member) would.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <string>

#include "cc/transport/address.h"

namespace bps {
namespace testing {

inline int RawConnect(const std::string& address) {
  auto parsed = ParseHostPort(address).value();
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(parsed.port));
  inet_pton(AF_INET, parsed.host.c_str(), &addr.sin_addr);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  return fd;
}

}  // namespace testing
}  // namespace bps
