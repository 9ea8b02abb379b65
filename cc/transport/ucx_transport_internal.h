// The UCX transport's state, for the files that implement it, each one concern:
//   ucx_transport.cc    the progress loop, peers and their loss, sending, receiving, shutdown
//   ucx_connections.cc  listening, accepting and connecting
//   ucx_handshake.cc    the proof of the job's secret, carried in active messages
// UCX itself is configured in ucx_context.h; rendezvous payloads are fetched by ucx_rendezvous.h.
// Everything here belongs to the progress thread (EventLoop) except what says otherwise.
#pragma once

#include <ucp/api/ucp.h>

#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cc/transport/event_loop.h"
#include "cc/transport/handshake.h"
#include "cc/transport/ucx_context.h"
#include "cc/transport/ucx_rendezvous.h"
#include "cc/transport/ucx_transport.h"

namespace bps {
namespace ucx_internal {

class UcxTransport : public Transport {
 public:
  ~UcxTransport() override { Shutdown(5); }

  Status Init(const UcxOptions& options);

  void SetHandler(MessageHandler* handler) override { handler_ = handler; }
  StatusOr<std::string> Listen(const std::string& host, int port) override;
  StatusOr<PeerId> Connect(const std::string& address, double timeout_s, Link link) override;
  void Send(PeerId to, std::string header, const void* payload, size_t length, SendCallback on_sent) override;
  std::string PeerName(PeerId peer) override;
  void Shutdown(double timeout_s) override;

 private:
  struct Peer {
    ucp_ep_h ep = nullptr;
    std::string name;
    bool other_host = false;  // the peer's address is not ours
    bool lost = false;
    // Set while Connect waits for the handshake. Shared: Connect may give up while this thread still holds it.
    std::shared_ptr<std::promise<Status>> hello;
    // Until the peer proved it holds the job's secret nothing it sends is delivered, and its loss is
    // nobody's business.
    bool authenticated = false;
    std::unique_ptr<ClientHandshake> connecting;  // we connected: our side of the proof
    std::unique_ptr<ServerHandshake> accepting;   // it connected: its side
    double accepted_at = 0;
  };

  // ucx_transport.cc
  void ProgressLoop();
  void SleepUntilEvent();
  PeerId AddPeer(ucp_ep_h ep, std::string name);
  PeerId PeerOf(const ucp_am_recv_param_t* param);
  void MarkLost(PeerId id, const Status& why);
  // Closes `ep` at once, dropping what it had still to send.
  static void ForceClose(ucp_ep_h ep);
  void CloseAll(double timeout_s);
  bool UseEager(const Peer& peer) const {
    return options_.eager == EagerPayloads::kAlways ||
           (options_.eager == EagerPayloads::kBetweenHosts && peer.other_host);
  }
  void Deliver(PeerId from, const std::string& header, void* payload, size_t length);
  static void OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);
  static ucs_status_t OnAm(void* arg, const void* header, size_t header_length, void* data, size_t length,
                           const ucp_am_recv_param_t* param);
  static ucs_status_t OnLargeHeaderAm(void* arg, const void* header, size_t header_length, void* data,
                                      size_t length, const ucp_am_recv_param_t* param);

  // ucx_connections.cc
  static void OnConnectionRequest(ucp_conn_request_h request, void* arg);
  // An attempt Connect gave up on: closed quietly (the caller never saw this peer).
  void ForgetConnectAttempt(PeerId id, const std::shared_ptr<std::promise<Status>>& hello);

  // ucx_handshake.cc
  static ucs_status_t OnHelloAm(void* arg, const void* header, size_t header_length, void* data,
                                size_t length, const ucp_am_recv_param_t* param);
  static ucs_status_t OnHelloAckAm(void* arg, const void* header, size_t header_length, void* data,
                                   size_t length, const ucp_am_recv_param_t* param);
  static ucs_status_t OnProofAm(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                const ucp_am_recv_param_t* param);
  static ucs_status_t OnVerdictAm(void* arg, const void* header, size_t header_length, void* data, size_t length,
                                  const ucp_am_recv_param_t* param);
  // The handshake of a connection we opened ended: Connect learns how; a peer that failed it is dropped.
  void ConnectAnswered(PeerId id, const Status& outcome);
  // Closes a peer that never became a member, without telling the handler.
  void DropUnauthenticated(PeerId id, const std::string& why);
  // An accepted peer that has not proved itself in time is turned away.
  void ExpireHandshakes();

  MessageHandler* handler_ = nullptr;
  UcxOptions options_;
  std::string local_host_;  // where we listen: peers elsewhere are on other hosts
  std::unique_ptr<UcxContext> ucx_;
  ucp_listener_h listener_ = nullptr;
  EventLoop loop_{"UCX progress thread"};
  std::mutex mu_;  // guards peer names (read by PeerName from other threads)

  // Owned by the progress thread.
  std::map<PeerId, Peer> peers_;
  std::unordered_map<ucp_ep_h, PeerId> peer_of_ep_;
  RendezvousReceives rendezvous_{[this](PeerId from, const std::string& header, void* payload, size_t length) {
    Deliver(from, header, payload, length);
  }};
  PeerId next_peer_ = 0;
};

}  // namespace ucx_internal
}  // namespace bps
