// A worker's requests in flight: each waits for its reply and completes exactly once, with the reply, with
// the job's failure (or its generation's), with its peer's loss, or with a timeout. A request whose payload
// the transport still sends from, or receives into, the caller's memory is answered only once the transport
// is done with it: a failure meanwhile waits (deferred).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "cc/common/status.h"
#include "cc/ps/data_mover.h"
#include "cc/ps/message.h"
#include "cc/transport/transport.h"

namespace bps {

struct Request {
  using Done = std::function<void(const Status&)>;
  using DeclareDone = std::function<void(const StatusOr<PartitionPlan>&)>;

  Done done;
  DeclareDone declare_done;  // a declaration's, instead of done
  bool sending = false;      // the transport still sends from `source`
  bool receiving = false;    // the transport still receives into `destination`
  Status deferred;           // a failure that came while the transport used the caller's memory
  PeerId peer = -1;          // where the reply must come from
  int server = -1;
  uint64_t key = 0;
  const void* source = nullptr;  // the pushed data (null: zeros), for a reply that echoes it
  void* destination = nullptr;
  size_t bytes = 0;
  bool sum = false;  // the reply carries a round's sum (counted in CommunicationCounters)
  // Moves the sum from the host to where `destination` stands for (a GPU tensor); null: it is there.
  std::shared_ptr<DataMover> mover;
  bool in_place = false;      // a push in place (ShareMode::kInPlace): the server writes the sum itself
  bool heap_offered = false;  // the push named this process's heap: the reply says whether the server maps it
  double started = 0;
  // What the request waits for, for error messages (WorkerOperations::Awaited). The sentence is composed
  // only when one is shown: a push does not build it.
  enum class Awaits : uint8_t { kSum, kPublished, kResidual, kDeclaration };
  Awaits awaits = Awaits::kSum;
  uint32_t round = 0;
  std::string tensor;  // a declaration's tensor name

  // Runs the request's callback with `status` (a declaration's gets it as its plan's status).
  void Answer(const Status& status);
};

class RequestTable {
 public:
  // Registers `request` and returns its id; once the job or the generation has failed, answers it at once
  // with that failure and returns 0: it must not be sent.
  uint64_t Track(Request request);

  // The job's first failure (peer lost, ABORT), or OK.
  Status failure() const;
  // Why this generation broke (elastic), or OK.
  Status generation_failure() const;
  // What a new request fails with: the job's failure, else the generation's, else OK.
  Status refusal() const;

  // Sets the job's failure, after which requests are refused; false if the job had failed already. The
  // caller then fails the requests in flight (FailAll).
  bool SetFailure(const Status& why);
  // Sets the generation's failure, the same way; false if the job or the generation had failed already.
  bool SetGenerationFailure(const Status& why);
  // A new generation formed: requests are taken again.
  void StartGeneration();
  // How many generations started (StartGeneration calls): what a generation's bookkeeping is tagged with.
  uint64_t generations() const;

  // Fails every request with `why`: at once those not using the caller's memory and those bound to `lost`
  // (a connection that is gone carries nothing), the others once the transport is done with them.
  void FailAll(const Status& why, PeerId lost = -1);
  // Fails the requests bound to `lost`, a connection that is gone, with `why`; the others go on (a server of
  // an earlier generation may close while this one runs).
  void FailPeer(const Status& why, PeerId lost);
  // Fails, with what `why` says of each, the requests older than `limit_s` at `now`.
  void FailExpired(double now, double limit_s, const std::function<Status(const Request&)>& why);

  // Where the payload of request `id`'s reply goes, if `from` is its peer and `length` its size, marking it
  // as receiving; null otherwise (the transport then drops the payload).
  void* ReceiveInto(uint64_t id, PeerId from, size_t length);
  // The transport finished sending request `id`'s payload: a failure deferred meanwhile is answered now.
  void Sent(uint64_t id);
  // Removes and returns request `id` for its reply from `from` (any peer when `from` < 0); nothing if it
  // was answered already or went to another peer.
  std::optional<Request> Take(uint64_t id, PeerId from);

  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<uint64_t, Request> requests_;
  uint64_t next_id_ = 1;
  uint64_t generations_ = 0;
  Status failure_;
  Status generation_failure_;
};

}  // namespace bps
