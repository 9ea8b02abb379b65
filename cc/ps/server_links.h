// A worker's connections to the job's servers, kept across generations while the servers stay (an elastic
// job goes on when one is lost, and takes in a new one), and the proof of its rank to each of them (IDENTIFY
// with the token the scheduler gave it), asked anew every generation.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cc/common/config.h"
#include "cc/common/one_shot.h"
#include "cc/common/status.h"
#include "cc/transport/transport.h"

namespace bps {

class ServerLinks {
 public:
  ServerLinks(const Config& config, Transport* transport) : config_(config), transport_(transport) {}

  // Connects to every server of `addresses` (by rank), each within BYTEPS_TIMEOUT, keeping the connections
  // to the servers of the last generation that are still there.
  Status Connect(const std::vector<std::string>& addresses);
  bool connected() const;
  // Whether the servers are those of `addresses`, each connected.
  bool Serves(const std::vector<std::string>& addresses) const;
  // The connection `peer` broke: a server there is gone, even if a new one comes at its address.
  void Lost(PeerId peer);
  // Whether `peer` was the connection to a server of an earlier generation, which this one no longer has.
  bool Retired(PeerId peer) const;

  // Shows every server `token`, so that this worker's connection speaks for `rank`; waits up to
  // BYTEPS_TIMEOUT for every answer.
  Status Identify(int rank, const std::string& token);
  // A server's answer to IDENTIFY.
  void OnIdentifyReply(PeerId from, const Status& answer);

  int size() const;
  PeerId peer(int server) const;
  // The rank of the server at `peer`, if it is one.
  std::optional<int> ServerAt(PeerId peer) const;
  // "server 1 (host:port)", for messages.
  std::string Name(int server) const;
  std::vector<std::string> Names() const;
  // By server rank: whether it listens on this worker's own host.
  std::vector<bool> OnThisHost() const;
  bool AllOnThisHost() const;

 private:
  std::string NameLocked(int server) const;

  const Config& config_;
  Transport* const transport_;
  mutable std::mutex mu_;
  std::vector<std::string> addresses_;
  std::vector<PeerId> peers_;
  std::vector<bool> on_this_host_;
  std::vector<bool> lost_;  // by server rank
  std::set<PeerId> retired_;
  std::vector<std::unique_ptr<OneShot<Status>>> identified_;  // by server rank: its answer to IDENTIFY
};

}  // namespace bps
