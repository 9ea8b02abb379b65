// Transport over plain TCP sockets, bps_tf's own: every connection proves it holds the job's secret before
// any other byte is read (handshake.h), and every length on the wire is checked (tcp_frames.h), so a
// stranger on the network can neither join a job nor crash a process with the bytes it sends.
//
// I/O threads own the sockets (tcp_io_thread.h), each a share of the connections, so that one process's
// traffic can use several cores (the kernel's TCP needs them for 100 Gbit/s); other threads hand them work.
// The handler's callbacks take turns all the same (handler_turns.h). A connection that stays silent longer
// than the liveness timeout (a frozen process, a cut cable) is reported lost: idle connections carry
// heartbeats.
#pragma once

#include <memory>

#include "cc/transport/job_auth.h"
#include "cc/transport/transport.h"

namespace bps {

struct TcpOptions {
  JobSecret secret;
  // A peer from which nothing (data or heartbeat) arrived for this long is reported lost.
  double liveness_timeout_s = 300;
  // SO_SNDBUF of connections between hosts; 0 keeps the kernel's autotuning. Bytes written to a socket
  // count as sent: a small buffer keeps them in our credit window, where priority still orders them.
  size_t send_buffer_bytes = 0;
  // An accepted connection must complete the handshake within this (a member needs a round trip), or it
  // is closed: strangers cannot hold connections open.
  double handshake_timeout_s = 3;
  // I/O threads; connections are spread over them round robin (BYTEPS_TCP_IO_THREADS).
  int io_threads = 1;
};

StatusOr<std::unique_ptr<Transport>> CreateTcpTransport(const TcpOptions& options);

}  // namespace bps
