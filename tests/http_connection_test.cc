// How the HTTP engine uses connections: the concurrent reads of a fresh
// plain-HTTP host go out at once, each on its own connection, rather than
// waiting for the first connection's answer to learn whether HTTP/2 can
// multiplex them (cleartext is always HTTP/1.1 here).
//
// The server below needs no test servers: it holds every request until
// `want` of them are in flight at once (or a 20 s hang guard passes), so the
// peak it records says whether the client ever had them all out together.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "rangeio/rangeio.h"

namespace rangeio {
namespace {

constexpr uint64_t kObjectBytes = 1 << 20;

// Answers "GET ... Range: bytes=A-B" with 206 and the simulated bytes of
// [A, B] of a kObjectBytes object, one thread per connection.
class BarrierServer {
 public:
  explicit BarrierServer(int want) : want_(want) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    listen(listen_fd_, 128);
    socklen_t len = sizeof addr;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }
  BarrierServer(const BarrierServer&) = delete;
  BarrierServer& operator=(const BarrierServer&) = delete;
  ~BarrierServer() {
    shutdown(listen_fd_, SHUT_RDWR);
    acceptor_.join();
    {
      std::lock_guard lk(mu_);
      released_ = true;
      for (int fd : fds_) shutdown(fd, SHUT_RDWR);
    }
    cv_.notify_all();
    for (std::thread& t : handlers_) t.join();
    for (int fd : fds_) close(fd);
    close(listen_fd_);
  }

  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/object.bin";
  }
  int peak_in_flight() {
    std::lock_guard lk(mu_);
    return peak_;
  }
  int requests() {
    std::lock_guard lk(mu_);
    return requests_;
  }
  int connections() {
    std::lock_guard lk(mu_);
    return static_cast<int>(fds_.size());
  }

 private:
  void AcceptLoop() {
    for (;;) {
      const int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      std::lock_guard lk(mu_);
      fds_.push_back(fd);
      handlers_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  void Serve(int fd) {
    std::string in;
    char buf[4096];
    for (;;) {
      size_t end;
      while ((end = in.find("\r\n\r\n")) == std::string::npos) {
        const ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) return;
        in.append(buf, static_cast<size_t>(n));
      }
      const std::string head = in.substr(0, end);
      in.erase(0, end + 4);
      uint64_t first = 0, last = 0;
      const size_t r = head.find("Range: bytes=");
      if (r == std::string::npos ||
          std::sscanf(head.c_str() + r + 13, "%lu-%lu", &first, &last) != 2 ||
          last < first || last >= kObjectBytes) {
        return;  // the client then sees a closed connection: the test fails
      }
      {
        std::unique_lock lk(mu_);
        ++requests_;
        ++in_flight_;
        peak_ = std::max(peak_, in_flight_);
        if (in_flight_ >= want_) released_ = true;
        cv_.notify_all();
        cv_.wait_for(lk, std::chrono::seconds(20), [&] { return released_; });
        --in_flight_;
      }
      std::string body(last - first + 1, '\0');
      FillSimulatedBytes(first, {reinterpret_cast<std::byte*>(body.data()),
                                 body.size()});
      const std::string reply =
          "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes " +
          std::to_string(first) + "-" + std::to_string(last) + "/" +
          std::to_string(kObjectBytes) +
          "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
          body;
      if (send(fd, reply.data(), reply.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(reply.size())) {
        return;
      }
    }
  }

  const int want_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable cv_;
  int in_flight_ = 0;      // GUARDED_BY(mu_)
  int peak_ = 0;           // GUARDED_BY(mu_)
  int requests_ = 0;       // GUARDED_BY(mu_)
  bool released_ = false;  // GUARDED_BY(mu_)
  std::vector<int> fds_;   // GUARDED_BY(mu_)
  std::vector<std::thread> handlers_;
};

TEST(HttpConnectionTest, ConcurrentReadsOfANewHostGoOutTogether) {
  constexpr int kReads = 8;
  BarrierServer server(kReads);
  HttpOptions ho;
  ho.size_hint = kObjectBytes;  // no size probe: only the reads themselves
  auto source = OpenHttpSource(server.url(), ho);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  Options o;
  o.io_concurrency = kReads;
  o.planner = PlannerOptions::None();
  auto reader = Reader::Open(*source, o);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  std::vector<ByteRange> ranges;
  for (int i = 0; i < kReads; ++i) {
    ranges.push_back({static_cast<uint64_t>(i) * 100'000, 4096});
  }
  auto stream = reader->ReadRanges(ranges, Delivery::kOrdered);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  for (int i = 0; i < kReads; ++i) {
    auto r = stream->Next();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_TRUE(r->has_value());
    const RangeResult& rr = **r;
    ASSERT_EQ(rr.bytes.size(), 4096u);
    EXPECT_EQ(rr.bytes.data()[0], SimulatedByteAt(ranges[rr.index].offset));
    EXPECT_EQ(rr.bytes.data()[4095],
              SimulatedByteAt(ranges[rr.index].offset + 4095));
  }
  // All eight were at the server together, each on its own connection
  // (HTTP/1.1 has one request per connection at a time), and none was
  // retried: no first-byte timeout had to break a wait.
  EXPECT_EQ(server.peak_in_flight(), kReads);
  EXPECT_EQ(server.requests(), kReads);
  EXPECT_EQ(server.connections(), kReads);
  auto hs = GetHttpStats(**source);
  ASSERT_TRUE(hs.ok()) << hs.status().ToString();
  EXPECT_EQ(hs->gets, static_cast<uint64_t>(kReads));
}

}  // namespace
}  // namespace rangeio
