// The raw TCP floor of a message's CPU cost: a blocking request/response client and server on loopback, each
// its own process (so each side's CPU is its own), with nothing of bps_tf between them.
//
// A request is an 8-byte length then --bytes of body; the reply the same with --reply-bytes (default 96, about
// a bps_tf PULL_REPLY header: a server's reply to a single worker's push carries no payload, so this mirrors
// a push). The client keeps --in-flight requests outstanding: it sends that many, then one more for each reply
// it reads. After --warmup exchanges both sides read their CPU clock (CLOCK_PROCESS_CPUTIME_ID), exchange
// --messages more, and read it again. One JSON line on stdout:
//   messages, wall_s (client, timed part), client_cpu_s, server_cpu_s, and the CPU microseconds per message
//   end: (client + server CPU) / (2 x messages), each exchange having two ends (a request sent and its reply
//   received, a request received and its reply sent); also each side's CPU per message.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {

struct Options {
  uint64_t bytes = 4096;
  uint64_t reply_bytes = 96;
  uint64_t messages = 100000;
  uint64_t warmup = 1000;
  uint64_t in_flight = 1;
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "tcp_floor: %s%s%s\n", what.c_str(), errno ? ": " : "", errno ? std::strerror(errno) : "");
  std::exit(1);
}

double CpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

double WallSeconds() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

void ReadAll(int fd, void* data, size_t length) {
  char* p = static_cast<char*>(data);
  while (length > 0) {
    const ssize_t n = recv(fd, p, length, MSG_WAITALL);
    if (n > 0) {
      p += n;
      length -= n;
    } else if (n == 0) {
      errno = 0;
      Die("the peer closed the connection");
    } else if (errno != EINTR) {
      Die("recv");
    }
  }
}

void WriteAll(int fd, const void* data, size_t length) {
  const char* p = static_cast<const char*>(data);
  while (length > 0) {
    const ssize_t n = send(fd, p, length, MSG_NOSIGNAL);
    if (n >= 0) {
      p += n;
      length -= n;
    } else if (errno != EINTR) {
      Die("send");
    }
  }
}

// A message: its 8-byte length, then its body (all in one buffer, sent with one call).
std::vector<char> Frame(uint64_t body_bytes) {
  std::vector<char> frame(sizeof(uint64_t) + body_bytes, 1);
  std::memcpy(frame.data(), &body_bytes, sizeof(uint64_t));
  return frame;
}

// Reads one message into `body` (grown as needed); returns its length.
uint64_t ReadMessage(int fd, std::vector<char>& body) {
  uint64_t length = 0;
  ReadAll(fd, &length, sizeof(length));
  if (length > (uint64_t(1) << 32)) {
    errno = 0;
    Die("a message longer than 4 GB");
  }
  if (body.size() < length) body.resize(length);
  ReadAll(fd, body.data(), length);
  return length;
}

void NoDelay(int fd) {
  const int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0) Die("TCP_NODELAY");
}

// Answers every request with a reply; reports its CPU over the timed exchanges on `report`.
void Serve(int listener, const Options& o, int report) {
  const int fd = accept(listener, nullptr, nullptr);
  if (fd < 0) Die("accept");
  close(listener);
  NoDelay(fd);
  const std::vector<char> reply = Frame(o.reply_bytes);
  std::vector<char> body(o.bytes);
  double start = 0;
  for (uint64_t i = 0; i < o.warmup + o.messages; ++i) {
    if (i == o.warmup) start = CpuSeconds();
    ReadMessage(fd, body);
    WriteAll(fd, reply.data(), reply.size());
  }
  const double cpu = CpuSeconds() - start;
  if (write(report, &cpu, sizeof(cpu)) != sizeof(cpu)) Die("write to the client");
  close(fd);
}

struct ClientResult {
  double wall_s, cpu_s;
};

ClientResult Run(int fd, const Options& o) {
  const std::vector<char> request = Frame(o.bytes);
  std::vector<char> body(o.reply_bytes);
  const uint64_t total = o.warmup + o.messages;
  uint64_t sent = 0;
  double cpu = 0, wall = 0;
  for (uint64_t received = 0; received < total; ++received) {
    while (sent < total && sent - received < o.in_flight) {
      WriteAll(fd, request.data(), request.size());
      ++sent;
    }
    ReadMessage(fd, body);
    if (received + 1 == o.warmup) {
      cpu = CpuSeconds();
      wall = WallSeconds();
    }
  }
  return {WallSeconds() - wall, CpuSeconds() - cpu};
}

uint64_t Number(const char* flag, const char* text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0') {
    errno = 0;
    Die(std::string(flag) + " takes a whole number, not '" + text + "'");
  }
  return value;
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help") {
      std::printf("tcp_floor [--bytes N] [--reply-bytes N] [--messages N] [--warmup N] [--in-flight K]\n");
      std::exit(0);
    }
    if (i + 1 == argc) {
      errno = 0;
      Die(flag + " needs a value (--help lists the flags)");
    }
    const uint64_t value = Number(argv[i], argv[i + 1]);
    ++i;
    if (flag == "--bytes") {
      o.bytes = value;
    } else if (flag == "--reply-bytes") {
      o.reply_bytes = value;
    } else if (flag == "--messages") {
      o.messages = value;
    } else if (flag == "--warmup") {
      o.warmup = value;
    } else if (flag == "--in-flight") {
      o.in_flight = value;
    } else {
      errno = 0;
      Die("unknown flag " + flag + " (--help lists the flags)");
    }
  }
  errno = 0;
  if (o.messages == 0 || o.warmup == 0 || o.in_flight == 0) Die("--messages, --warmup and --in-flight must be > 0");
  // The client writes requests while replies queue unread: the replies of a window must fit in the socket
  // buffers, or both sides block writing.
  if (o.in_flight > 1 && o.in_flight * (o.reply_bytes + 8) > (64 << 10)) {
    Die("--in-flight x --reply-bytes must stay within 64 KB (replies wait unread while requests are written)");
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) Die("socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) Die("bind");
  if (listen(listener, 1) != 0) Die("listen");
  if (getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) Die("getsockname");
  int report[2];
  if (pipe(report) != 0) Die("pipe");

  const pid_t server = fork();
  if (server < 0) Die("fork");
  if (server == 0) {
    close(report[0]);
    Serve(listener, o, report[1]);
    _exit(0);
  }
  close(listener);
  close(report[1]);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) Die("socket");
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) Die("connect");
  NoDelay(fd);
  const ClientResult client = Run(fd, o);
  double server_cpu = 0;
  if (read(report[0], &server_cpu, sizeof(server_cpu)) != sizeof(server_cpu)) Die("the server's report");
  close(fd);
  int status = 0;
  waitpid(server, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    errno = 0;
    Die("the server process failed");
  }
  const double n = static_cast<double>(o.messages);
  std::printf(
      "{\"bytes\":%llu,\"reply_bytes\":%llu,\"in_flight\":%llu,\"messages\":%llu,\"wall_s\":%.6f,"
      "\"client_cpu_s\":%.6f,\"server_cpu_s\":%.6f,\"client_cpu_us_per_message\":%.3f,"
      "\"server_cpu_us_per_message\":%.3f,\"cpu_us_per_message_end\":%.3f}\n",
      static_cast<unsigned long long>(o.bytes), static_cast<unsigned long long>(o.reply_bytes),
      static_cast<unsigned long long>(o.in_flight), static_cast<unsigned long long>(o.messages), client.wall_s,
      client.cpu_s, server_cpu, client.cpu_s / n * 1e6, server_cpu / n * 1e6,
      (client.cpu_s + server_cpu) / (2 * n) * 1e6);
  return 0;
}
