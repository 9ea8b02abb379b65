// The active messages bps_tf's UCX transport exchanges, and sending one.
#pragma once

#include <ucp/api/ucp.h>

#include <string>

#include "cc/transport/transport.h"

namespace bps {

enum AmId : unsigned {
  kAmMessage = 0,      // header = message header, data = payload
  kAmLargeHeader = 1,  // header too large for an AM header: sent as the data, no payload
  kAmHello = 2,        // client -> server on connect
  kAmHelloAck = 3,     // server -> client: the connection works both ways; header: the handshake's hello
  kAmProof = 4,        // client -> server, header: the handshake's answer
  kAmVerdict = 5,      // server -> client, header: the handshake's verdict
};

// Sends active message `id` on `ep`; the receiver may reply on the same endpoint. `data` must stay valid
// until `on_sent` runs (now, if the send completed or failed at once: then the status is returned;
// otherwise later on the progress thread, and UCS_INPROGRESS is returned). `eager` forces UCX's eager
// protocol for the data.
ucs_status_t SendAm(ucp_ep_h ep, unsigned id, std::string header, const void* data, size_t length,
                    SendCallback on_sent, bool eager = false);

}  // namespace bps
