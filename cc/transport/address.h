// "host:port" strings and the choice of the address a node advertises.
#pragma once

#include <netinet/in.h>

#include <string>

#include "cc/common/status.h"

namespace bps {

struct HostPort {
  std::string host;
  int port = 0;
  std::string ToString() const { return host + ":" + std::to_string(port); }
};

StatusOr<HostPort> ParseHostPort(const std::string& address);

// `host` (an IPv4 address in dotted form) and `port` as a socket address; false if `host` is not one.
bool Ipv4SocketAddress(const std::string& host, int port, sockaddr_in* addr);

// The IPv4 address of network interface `name` (DMLC_INTERFACE).
StatusOr<std::string> InterfaceAddress(const std::string& name);

// The local address the kernel would use to reach `remote_host` (no packet is sent).
StatusOr<std::string> RouteSourceAddress(const std::string& remote_host, int remote_port);

}  // namespace bps
