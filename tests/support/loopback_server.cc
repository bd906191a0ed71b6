#include "support/loopback_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>

#include "rangeio/sim.h"

namespace rangeio::testing {

int ListenOnLoopback(int* port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(fd, 128) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return -1;
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

LoopbackServer::LoopbackServer(std::function<void(int fd)> serve)
    : serve_(std::move(serve)) {
  listen_fd_ = ListenOnLoopback(&port_);
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

LoopbackServer::~LoopbackServer() {
  ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  acceptor_.join();
  {
    std::lock_guard lk(mu_);
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
  }
  for (std::thread& t : handlers_) t.join();
  for (int fd : fds_) ::close(fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

int LoopbackServer::connections() {
  std::lock_guard lk(mu_);
  return static_cast<int>(fds_.size());
}

void LoopbackServer::AcceptLoop() {
  if (listen_fd_ < 0) return;
  for (;;) {
    const int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) return;
    std::lock_guard lk(mu_);
    fds_.push_back(fd);
    handlers_.emplace_back([this, fd] { serve_(fd); });
  }
}

bool NextRangeRequest(int fd, std::string* in, uint64_t object_bytes,
                      uint64_t* first, uint64_t* last) {
  char buf[4096];
  size_t end;
  while ((end = in->find("\r\n\r\n")) == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return false;
    in->append(buf, static_cast<size_t>(n));
  }
  const std::string head = in->substr(0, end);
  in->erase(0, end + 4);
  const size_t r = head.find("Range: bytes=");
  return r != std::string::npos &&
         std::sscanf(head.c_str() + r + 13, "%lu-%lu", first, last) == 2 &&
         *first <= *last && *last < object_bytes;
}

std::string PartialContentReply(uint64_t first, uint64_t last,
                                uint64_t object_bytes) {
  std::string body(last - first + 1, '\0');
  FillSimulatedBytes(first,
                     {reinterpret_cast<std::byte*>(body.data()), body.size()});
  return "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes " +
         std::to_string(first) + "-" + std::to_string(last) + "/" +
         std::to_string(object_bytes) +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
         body;
}

}  // namespace rangeio::testing
