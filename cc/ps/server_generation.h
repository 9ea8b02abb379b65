// A server's view of the current generation's workers: how many there are, which connection speaks for
// which rank (proven by the token the scheduler gave that worker), and who has finished (and who of those
// joined, so that the rounds they miss complete without them). Each address book starts a generation; a
// RESET ends it. Not thread-safe: the server calls it under the lock that also guards its keys, so that a
// push is checked against one consistent view of both.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cc/common/status.h"
#include "cc/ps/message.h"
#include "cc/transport/transport.h"

namespace bps {

class ServerGeneration {
 public:
  // Takes a generation's address book: its workers and their tokens. Every worker proves its (new) rank
  // anew. Returns whether this was the job's first book.
  bool Start(const AddressBook& book);

  // Lets `from` speak for worker `rank` if `token` is that worker's; otherwise says why not.
  Status Identify(PeerId from, int rank, const std::string& token);
  // The rank `from` speaks for, if it identified.
  std::optional<int> RankOf(PeerId from) const;
  // `peer`'s connection is gone: its rank is free again.
  void Forget(PeerId peer);

  void WorkerFinished(int rank, bool joined);
  // Contributors of a key that finished: worker ranks (contribution indices), or machines all of whose
  // processes finished.
  std::set<int> FinishedContributors(const KeySpec& spec) const;
  // Those of them that joined (their rounds complete without them).
  std::set<int> JoinedContributors(const KeySpec& spec) const;

  // The generation ended (`dropped`: it broke, and its late pushes are answered kRoundDropped until the
  // next book). Returns the connections identified in it.
  std::set<PeerId> End(bool dropped);
  bool dropped() const { return dropped_; }

  int num_workers() const { return num_workers_; }
  int local_size() const { return local_size_; }

 private:
  std::set<int> ContributorsAmong(const KeySpec& spec, const std::set<int>& workers) const;

  int generation_ = 0;  // of the last address book
  int num_workers_ = 0;
  int local_size_ = 1;
  std::vector<std::string> tokens_;  // by worker rank
  std::map<PeerId, int> rank_of_;    // identified worker connections
  std::map<int, PeerId> peer_of_;    // and the other way
  std::set<int> finished_;           // this generation's
  std::set<int> joined_;             // those of them that joined
  bool dropped_ = false;             // the last RESET dropped a generation that broke; no book since
};

}  // namespace bps
