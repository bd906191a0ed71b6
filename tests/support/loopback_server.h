// tests/support/loopback_server.h — a TCP server on 127.0.0.1 for tests that
// need a peer of their own (an upstream for the latency relay, a server that
// holds requests), with no test servers running.
//
// Thread-safety: port(), hostport() and connections() may be called from any
// thread; `serve` runs on one thread per accepted connection.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rangeio::testing {

// A socket listening on 127.0.0.1 at a port the kernel picks, written to
// *port; -1 on failure.
int ListenOnLoopback(int* port);

// Listens on 127.0.0.1 and runs `serve(fd)` on a thread of its own for each
// connection accepted. The destructor stops accepting, shuts every
// connection down (so a handler blocked in recv() returns), joins the
// handlers and closes the descriptors: an owner whose handlers wait on its
// own state must wake them first, and declare this member last.
class LoopbackServer {
 public:
  explicit LoopbackServer(std::function<void(int fd)> serve);
  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;
  ~LoopbackServer();

  int port() const { return port_; }
  std::string hostport() const { return "127.0.0.1:" + std::to_string(port_); }
  // Connections accepted so far.
  int connections();

 private:
  void AcceptLoop();

  const std::function<void(int fd)> serve_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::mutex mu_;
  std::vector<int> fds_;               // GUARDED_BY(mu_)
  std::vector<std::thread> handlers_;  // GUARDED_BY(mu_)
  std::thread acceptor_;
};

// For a handler serving ranged GETs of a simulated object of
// `object_bytes` (FillSimulatedBytes): reads the next request head from `fd`
// (`in` keeps bytes read past it) and parses its Range into [*first, *last].
// False when the connection ended or the request has no valid range (the
// handler then closes, and the client sees a closed connection).
bool NextRangeRequest(int fd, std::string* in, uint64_t object_bytes,
                      uint64_t* first, uint64_t* last);

// The 206 answer to bytes [first, last] of that object.
std::string PartialContentReply(uint64_t first, uint64_t last,
                                uint64_t object_bytes);

}  // namespace rangeio::testing
