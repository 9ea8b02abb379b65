#include "cc/transport/address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace bps {

StatusOr<HostPort> ParseHostPort(const std::string& address) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgument("address '" + address + "' is not of the form host:port");
  }
  HostPort hp;
  hp.host = address.substr(0, colon);
  char* end = nullptr;
  long port = std::strtol(address.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port < 0 || port > 65535) {
    return InvalidArgument("address '" + address + "' has an invalid port");
  }
  hp.port = static_cast<int>(port);
  return hp;
}

bool Ipv4SocketAddress(const std::string& host, int port, sockaddr_in* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sin_family = AF_INET;
  addr->sin_port = htons(static_cast<uint16_t>(port));
  return inet_pton(AF_INET, host.c_str(), &addr->sin_addr) == 1;
}

StatusOr<std::string> InterfaceAddress(const std::string& name) {
  struct ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return Internal(std::string("getifaddrs failed: ") + strerror(errno));
  std::string found;
  for (struct ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET || name != it->ifa_name) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr, text, sizeof(text));
    found = text;
    break;
  }
  freeifaddrs(list);
  if (found.empty()) {
    return InvalidArgument("DMLC_INTERFACE='" + name + "' has no IPv4 address on this machine (see `ip addr`).");
  }
  return found;
}

StatusOr<std::string> RouteSourceAddress(const std::string& remote_host, int remote_port) {
  struct addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  struct addrinfo* res = nullptr;
  if (getaddrinfo(remote_host.c_str(), std::to_string(remote_port).c_str(), &hints, &res) != 0 || !res) {
    return InvalidArgument("cannot resolve '" + remote_host + "' (DMLC_PS_ROOT_URI)");
  }
  // Connecting a UDP socket only selects a route; nothing is sent.
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  std::string result;
  if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
    sockaddr_in local;
    socklen_t len = sizeof(local);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      char text[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text));
      result = text;
    }
  }
  if (fd >= 0) close(fd);
  freeaddrinfo(res);
  if (result.empty()) return Unavailable("no route to '" + remote_host + "'; set DMLC_NODE_HOST or DMLC_INTERFACE");
  return result;
}

}  // namespace bps
