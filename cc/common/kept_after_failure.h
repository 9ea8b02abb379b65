// Memory that a failed push in place named. A server on this host reads such a push where it lies and
// writes the round's sum into the worker's output, so after the push_pull failed (a generation broke) a
// server may still be writing there. The owner hands that memory over (Keep) rather than freeing it. A
// generation's end drains every server's summing threads and retires its rounds, so once the next
// generation formed with the same servers (ServersDrained) nothing can write there any more and it is let
// go. Where a drain cannot be known (a server lost: a stopped one may resume mid-write; a scheduler started
// again), everything kept from then on stays for the life of the process (KeepForever).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace bps {

class KeptAfterFailure {
 public:
  static KeptAfterFailure& OfProcess();

  // `holder` owns `bytes` of memory a server may still write; destroyed once that cannot happen.
  void Keep(std::shared_ptr<void> holder, uint64_t bytes);
  // Every server this process pushed to has drained the generations before the one now formed.
  void ServersDrained();
  // A server may not have drained (it was lost, or the scheduler was): what is kept now or later stays.
  void KeepForever();
  // Bytes kept now.
  uint64_t bytes();

 private:
  struct Entry {
    std::shared_ptr<void> holder;
    uint64_t bytes;
  };
  std::mutex mu_;
  std::vector<Entry> kept_;
  uint64_t bytes_ = 0;
  bool forever_ = false;
};

}  // namespace bps
