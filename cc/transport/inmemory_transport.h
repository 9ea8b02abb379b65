// A Transport for unit tests: N "nodes" as objects in one process, each with its own delivery thread,
// so multi-rank tests can run ranks as threads (gloo-style) without sockets.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "cc/transport/transport.h"

namespace bps {

class InMemoryTransport;

// The address space the in-memory transports listen in.
class InMemoryNetwork {
 public:
  void Register(const std::string& address, InMemoryTransport* transport);
  void Unregister(const std::string& address);
  InMemoryTransport* Find(const std::string& address);
  int NextPort();

 private:
  std::mutex mu_;
  std::map<std::string, InMemoryTransport*> listeners_;
  int next_port_ = 10000;
};

std::unique_ptr<Transport> CreateInMemoryTransport(std::shared_ptr<InMemoryNetwork> network);

}  // namespace bps
