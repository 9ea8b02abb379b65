// Payloads UCX announces by rendezvous. The active-message callback only learns of them; they are fetched
// (ucp_am_recv_data_nbx) once the callback has returned, straight into the buffer the handler chose, and
// delivered when they arrived.
#pragma once

#include <ucp/api/ucp.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cc/transport/transport.h"

namespace bps {

class RendezvousReceives {
 public:
  // A message complete (payload nullptr: it could not be fetched).
  using Deliver = std::function<void(PeerId from, const std::string& header, void* payload, size_t length)>;

  explicit RendezvousReceives(Deliver deliver) : deliver_(std::move(deliver)) {}

  // From the callback of message `header`: its `length` payload bytes go to `destination`.
  void Expect(void* descriptor, PeerId from, std::string header, void* destination, size_t length);
  // From the callback of a large header, which travels as the data (delivered without a payload).
  void ExpectLargeHeader(void* descriptor, PeerId from, size_t length);
  bool empty() const { return pending_.empty(); }
  // On the progress thread, outside callbacks: fetches what is expected.
  void FetchAll(ucp_worker_h worker);

 private:
  struct Pending {
    void* descriptor;
    void* destination;
    size_t length;
    PeerId from;
    std::string header;
    std::unique_ptr<std::string> large_header;  // set when the payload is itself a large header
  };
  struct Fetch {  // one receive in flight
    RendezvousReceives* self;
    Pending receive;
  };

  static void OnReceived(void* request, ucs_status_t status, size_t length, void* user_data);
  void Delivered(Pending& receive, bool ok);

  const Deliver deliver_;
  std::vector<Pending> pending_;
};

}  // namespace bps
