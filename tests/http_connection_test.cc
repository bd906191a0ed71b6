// How the HTTP engine uses connections: the concurrent reads of a fresh
// plain-HTTP host go out at once, each on its own connection, rather than
// waiting for the first connection's answer to learn whether HTTP/2 can
// multiplex them (cleartext is always HTTP/1.1 here).
//
// The server below needs no test servers: it holds every request until
// `want` of them are in flight at once (or a 20 s hang guard passes), so the
// peak it records says whether the client ever had them all out together.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "rangeio/rangeio.h"
#include "support/loopback_server.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

constexpr uint64_t kObjectBytes = 1 << 20;

// Answers "GET ... Range: bytes=A-B" with 206 and the simulated bytes of
// [A, B] of a kObjectBytes object, one thread per connection.
class BarrierServer {
 public:
  explicit BarrierServer(int want) : want_(want) {}
  BarrierServer(const BarrierServer&) = delete;
  BarrierServer& operator=(const BarrierServer&) = delete;
  ~BarrierServer() {
    {
      std::lock_guard lk(mu_);
      released_ = true;  // then server_ shuts the connections down
    }
    cv_.notify_all();
  }

  std::string url() const {
    return "http://" + server_.hostport() + "/object.bin";
  }
  int peak_in_flight() {
    std::lock_guard lk(mu_);
    return peak_;
  }
  int requests() {
    std::lock_guard lk(mu_);
    return requests_;
  }
  int connections() { return server_.connections(); }

 private:
  void Serve(int fd) {
    std::string in;
    uint64_t first = 0, last = 0;
    while (testing::NextRangeRequest(fd, &in, kObjectBytes, &first, &last)) {
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
      const std::string reply =
          testing::PartialContentReply(first, last, kObjectBytes);
      if (send(fd, reply.data(), reply.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(reply.size())) {
        return;
      }
    }
  }

  const int want_;
  std::mutex mu_;
  std::condition_variable cv_;
  int in_flight_ = 0;      // GUARDED_BY(mu_)
  int peak_ = 0;           // GUARDED_BY(mu_)
  int requests_ = 0;       // GUARDED_BY(mu_)
  bool released_ = false;  // GUARDED_BY(mu_)
  testing::LoopbackServer server_{[this](int fd) { Serve(fd); }};  // last
};

TEST(HttpConnectionTest, ConcurrentReadsOfANewHostGoOutTogether) {
  constexpr int kReads = 8;
  BarrierServer server(kReads);
  HttpOptions ho;
  ho.size_hint = kObjectBytes;  // no size probe: only the reads themselves
  auto source = OpenHttpSource(server.url(), ho);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  Options o;
  o.limiter.io_concurrency = kReads;
  o.reader.planner = PlannerOptions::None();
  auto reader = Reader::Open(*source, o);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  std::vector<ByteRange> ranges;
  for (int i = 0; i < kReads; ++i) {
    ranges.push_back({static_cast<uint64_t>(i) * 100'000, 4096});
  }
  auto stream = reader->ReadRanges(ranges, Delivery::kOrdered);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  const testing::DrainResult out =
      testing::Drain(*stream, ranges, SimulatedByteAt);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.bad_bytes, 0u);
  EXPECT_EQ(out.indexes, testing::Iota(ranges.size()));
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
