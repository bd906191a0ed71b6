// Adaptive concurrency (src/http/endpoint_limit.h): the limit shrinks on
// throttles and recovers, stays within [1, C], never cancels what is in
// flight when it shrinks below it, and is one per endpoint; end to end, HTTP
// reads through a server that throttles deliver every byte with the limit
// shared by the sources of one endpoint. Bounds and counts only, no timing.
#include "http/endpoint_limit.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "rangeio/rangeio.h"
#include "support/loopback_server.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

using detail::EndpointLimit;
using Outcome = EndpointLimit::Outcome;

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kTtfb = 24 * kMs;

// Ends an attempt sent at the next tick of *now, at the tick after.
void End(EndpointLimit& e, uint64_t* now, Outcome outcome, uint64_t ttfb) {
  const uint64_t sent = ++*now;
  const uint64_t at = ++*now;
  e.Release(outcome, sent, ttfb, at);
}

// Takes `n` slots (all must be granted).
void Acquire(EndpointLimit& e, int n) {
  for (int i = 0; i < n; ++i) ASSERT_TRUE(e.TryAcquire()) << "slot " << i;
}

TEST(EndpointLimitTest, StartsAtTheCeilingAndGrantsExactlyThatMany) {
  EndpointLimit e(8);
  Acquire(e, 8);
  EXPECT_FALSE(e.TryAcquire());
  const auto s = e.Get(1);
  EXPECT_EQ(s.limit, 8u);
  EXPECT_EQ(s.min_limit, 8u);
  EXPECT_EQ(s.in_flight, 8u);
  EXPECT_EQ(s.throttles, 0u);
  EXPECT_EQ(s.throttled_ns, 0u);
}

TEST(EndpointLimitTest, ThrottlesCutHalfThenTenPercentDownToOneNeverBelow) {
  EndpointLimit e(64);
  uint64_t now = 1000;
  Acquire(e, 1);
  End(e, &now, Outcome::kThrottled, 0);
  EXPECT_EQ(e.Get(now).limit, 32u);
  uint32_t last = 32;
  for (int i = 0; i < 200; ++i) {
    Acquire(e, 1);
    const uint64_t sent = ++now;
    e.Release(Outcome::kThrottled, sent, 0, ++now);
    const auto s = e.Get(now);
    EXPECT_GE(s.limit, 1u);
    EXPECT_LE(s.limit, last);
    EXPECT_EQ(s.min_limit, s.limit);
    last = s.limit;
  }
  EXPECT_EQ(last, 1u);
  EXPECT_EQ(e.Get(now).throttles, 201u);
  // At 1 a slot is still granted: reads go on, one at a time.
  EXPECT_TRUE(e.TryAcquire());
  EXPECT_FALSE(e.TryAcquire());
}

TEST(EndpointLimitTest, OneCutPerWindowOfAttempts) {
  EndpointLimit e(64);
  Acquire(e, 20);
  const uint64_t sent = 100;  // all sent before the first answer
  for (int i = 0; i < 20; ++i) e.Release(Outcome::kThrottled, sent, 0, 200 + i);
  // One cut: the other 19 were sent before it, under the old limit.
  EXPECT_EQ(e.Get(300).limit, 32u);
  EXPECT_EQ(e.Get(300).throttles, 20u);
}

// Shrinking below the attempts in flight cancels none: they all release,
// and new ones are granted only once fewer than the limit remain.
TEST(EndpointLimitTest, ShrinkingBelowInFlightWaitsForThem) {
  EndpointLimit e(16);
  Acquire(e, 16);
  e.Release(Outcome::kThrottled, 10, 0, 20);  // limit 8, 15 in flight
  EXPECT_EQ(e.Get(20).limit, 8u);
  EXPECT_EQ(e.Get(20).in_flight, 15u);
  EXPECT_FALSE(e.TryAcquire());
  for (int i = 0; i < 7; ++i) e.Release(Outcome::kAnswered, 10, kTtfb, 30);
  EXPECT_EQ(e.Get(30).in_flight, 8u);
  EXPECT_FALSE(e.TryAcquire());
  e.Release(Outcome::kOther, 10, 0, 31);
  EXPECT_TRUE(e.TryAcquire());
}

// After throttling stops, answers at the latency floor with the window in
// use grow the limit back to the ceiling, never past it, and the throttled
// time closes there.
TEST(EndpointLimitTest, RecoversToTheCeilingAndNeverAbove) {
  constexpr uint32_t kC = 32;
  EndpointLimit e(kC);
  uint64_t now = 1000;
  Acquire(e, 1);
  End(e, &now, Outcome::kThrottled, 0);
  Acquire(e, 1);
  End(e, &now, Outcome::kThrottled, 0);
  EXPECT_EQ(e.Get(now).limit, 14u);  // 32 -> 16 -> 14
  const uint64_t throttled_at = now;
  for (int i = 0; i < 20'000 && e.Get(now).limit < kC; ++i) {
    const uint32_t limit = e.Get(now).limit;
    Acquire(e, static_cast<int>(limit));  // a full window
    for (uint32_t k = 0; k < limit; ++k) {
      End(e, &now, Outcome::kAnswered, kTtfb);
    }
    const auto s = e.Get(now);
    EXPECT_LE(s.limit, kC);
    EXPECT_GE(s.limit, limit);
  }
  auto s = e.Get(now);
  EXPECT_EQ(s.limit, kC);
  EXPECT_EQ(s.min_limit, 14u);
  // From the first throttle (2 ns before the second) to the ceiling.
  EXPECT_GT(s.throttled_ns, 2u);
  EXPECT_LE(s.throttled_ns, now - throttled_at + 2);
  // Closed: time passing at the ceiling adds nothing.
  EXPECT_EQ(e.Get(now + 5'000).throttled_ns, s.throttled_ns);
  for (int i = 0; i < 1000; ++i) {
    Acquire(e, static_cast<int>(kC));
    for (uint32_t k = 0; k < kC; ++k) {
      End(e, &now, Outcome::kAnswered, kTtfb);
    }
  }
  EXPECT_EQ(e.Get(now).limit, kC);
}

// A window that is mostly idle says nothing about a larger one.
TEST(EndpointLimitTest, AnIdleWindowDoesNotGrow) {
  EndpointLimit e(32);
  uint64_t now = 1000;
  Acquire(e, 1);
  End(e, &now, Outcome::kThrottled, 0);  // 16
  for (int i = 0; i < 10'000; ++i) {
    Acquire(e, 1);
    End(e, &now, Outcome::kAnswered, kTtfb);
  }
  EXPECT_EQ(e.Get(now).limit, 16u);
}

// Latency: answers at 3x the floor hold the limit where it is, they never
// cut it; back at the floor it grows again.
TEST(EndpointLimitTest, RisingLatencyHoldsGrowthButNeverCuts) {
  EndpointLimit e(64);
  uint64_t now = 1000;
  auto window = [&](uint64_t ttfb) {
    const uint32_t limit = e.Get(now).limit;
    Acquire(e, static_cast<int>(limit));
    for (uint32_t k = 0; k < limit; ++k) {
      End(e, &now, Outcome::kAnswered, ttfb);
    }
  };
  Acquire(e, 1);
  End(e, &now, Outcome::kThrottled, 0);       // 32
  for (int i = 0; i < 4; ++i) window(kTtfb);  // the floor: 24 ms
  const uint32_t before = e.Get(now).limit;
  EXPECT_GE(before, 32u);
  for (int i = 0; i < 10; ++i) window(3 * kTtfb);
  const uint32_t held = e.Get(now).limit;
  EXPECT_LE(held, before + 1);  // a few answers while the average rose
  EXPECT_GE(held, before);      // never cut
  for (int i = 0; i < 200; ++i) window(kTtfb);
  EXPECT_GT(e.Get(now).limit, held);
  EXPECT_EQ(e.Get(now).min_limit, 32u);
}

TEST(EndpointLimitTest, OneSharedLimitPerEndpoint) {
  auto a = EndpointLimit::Shared("http://127.0.0.1:1 test-a", 8);
  auto b = EndpointLimit::Shared("http://127.0.0.1:1 test-a", 16);
  auto c = EndpointLimit::Shared("http://127.0.0.1:2 test-a", 8);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_NE(a.get(), c.get());
  EXPECT_EQ(a->Get(1).ceiling, 16u);  // raised by the larger pool
  EXPECT_EQ(c->Get(1).ceiling, 8u);
  // Once no source holds it, the endpoint starts afresh.
  Acquire(*a, 1);
  a->Release(Outcome::kThrottled, 5, 0, 6);
  a.reset();
  b.reset();
  auto d = EndpointLimit::Shared("http://127.0.0.1:1 test-a", 8);
  EXPECT_EQ(d->Get(7).limit, 8u);
  EXPECT_EQ(d->Get(7).throttles, 0u);
}

// Many threads taking and releasing slots with random outcomes (TSan runs
// this): the limit stays in [1, C] and slots in flight never exceed the
// limit in force when they were granted, nor C.
TEST(EndpointLimitTest, ConcurrentUseKeepsTheBounds) {
  constexpr uint32_t kC = 16;
  EndpointLimit e(kC);
  std::atomic<uint64_t> clock{1};
  std::atomic<uint32_t> held{0};
  std::atomic<uint32_t> peak{0};
  std::atomic<bool> bad{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      for (int i = 0; i < 20'000; ++i) {
        if (!e.TryAcquire()) continue;
        const uint32_t h = held.fetch_add(1) + 1;
        uint32_t p = peak.load();
        while (h > p && !peak.compare_exchange_weak(p, h)) {
        }
        const uint64_t sent = clock.fetch_add(1);
        const int r = static_cast<int>(rng() % 10);
        const Outcome o = r == 0   ? Outcome::kThrottled
                          : r == 1 ? Outcome::kOther
                                   : Outcome::kAnswered;
        held.fetch_sub(1);
        e.Release(o, sent, kTtfb, clock.fetch_add(1));
        const auto s = e.Get(clock.load());
        if (s.limit < 1 || s.limit > kC || s.min_limit < 1) bad = true;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_FALSE(bad.load());
  EXPECT_LE(peak.load(), kC);
  EXPECT_EQ(e.Get(clock.load()).in_flight, 0u);
}

// --- End to end: HTTP sources through a server that throttles. ---

constexpr uint64_t kObjectBytes = 1 << 20;

// Answers "GET ... Range: bytes=A-B" with 206 and the simulated bytes, one
// thread per connection; its first `throttle_first` requests, and any that
// finds `capacity` others being answered, get 503 SlowDown instead (a store
// with a few slots). Each answer is held `hold` so that requests overlap.
class ThrottlingServer {
 public:
  ThrottlingServer(int throttle_first, int capacity)
      : throttle_first_(throttle_first), capacity_(capacity) {}

  std::string url() const {
    return "http://" + server_.hostport() + "/object.bin";
  }
  int throttled() {
    std::lock_guard lk(mu_);
    return throttled_;
  }

 private:
  void Serve(int fd) {
    std::string in;
    uint64_t first = 0, last = 0;
    while (testing::NextRangeRequest(fd, &in, kObjectBytes, &first, &last)) {
      bool throttle;
      {
        std::lock_guard lk(mu_);
        throttle = requests_++ < throttle_first_ || busy_ >= capacity_;
        throttled_ += throttle ? 1 : 0;
        busy_ += throttle ? 0 : 1;
      }
      std::string reply;
      if (throttle) {
        const std::string body = "<Error><Code>SlowDown</Code></Error>";
        reply = "HTTP/1.1 503 Slow Down\r\nContent-Length: " +
                std::to_string(body.size()) + "\r\n\r\n" + body;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        reply = testing::PartialContentReply(first, last, kObjectBytes);
        std::lock_guard lk(mu_);
        --busy_;
      }
      if (send(fd, reply.data(), reply.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(reply.size())) {
        return;
      }
    }
  }

  const int throttle_first_;
  const int capacity_;
  std::mutex mu_;
  int requests_ = 0;   // GUARDED_BY(mu_)
  int busy_ = 0;       // GUARDED_BY(mu_)
  int throttled_ = 0;  // GUARDED_BY(mu_)
  testing::LoopbackServer server_{[this](int fd) { Serve(fd); }};  // last
};

// Reads `n` 4 KiB ranges of `source` at io_concurrency `c` and checks every
// byte: no range lost, none short, no hang.
void ReadAllAndCheck(const std::shared_ptr<Source>& source, uint32_t c, int n) {
  Options o;
  o.limiter.io_concurrency = c;
  o.reader.planner = PlannerOptions::None();
  auto reader = Reader::Open(source, o);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  std::vector<ByteRange> ranges;
  for (int i = 0; i < n; ++i) {
    ranges.push_back({static_cast<uint64_t>(i % 200) * 5'000, 4096});
  }
  auto stream = reader->ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  const testing::DrainResult out =
      testing::Drain(*stream, ranges, SimulatedByteAt);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.bad_bytes, 0u);
  testing::ExpectEachIndexOnce(out.indexes, ranges.size());
}

HttpOptions Http(uint32_t c, bool adaptive) {
  HttpOptions ho;
  ho.size_hint = kObjectBytes;
  ho.max_connections = c;
  ho.adaptive = adaptive;
  ho.retry_base_backoff = std::chrono::milliseconds(1);
  ho.max_attempts = 100;  // every read ends with its bytes
  return ho;
}

// The first throttles cut the shared limit below the reads in flight (16 out,
// limit 8): every read still completes with its bytes, and the two sources
// of the endpoint report the same limit and throttles.
TEST(AdaptiveHttpTest, ThrottledReadsAllCompleteWithinTheBounds) {
  constexpr uint32_t kC = 16;
  ThrottlingServer server(/*throttle_first=*/4, /*capacity=*/4);
  auto a = OpenHttpSource(server.url(), Http(kC, true));
  auto b = OpenHttpSource(server.url(), Http(kC, true));
  ASSERT_TRUE(a.ok() && b.ok());
  ReadAllAndCheck(*a, kC, 400);
  auto sa = GetHttpStats(**a);
  auto sb = GetHttpStats(**b);
  ASSERT_TRUE(sa.ok() && sb.ok());
  EXPECT_GE(sa->throttled, 4u);
  EXPECT_EQ(sa->throttled, static_cast<uint64_t>(server.throttled()));
  EXPECT_EQ(sa->endpoint_throttles, sa->throttled);
  EXPECT_LE(sa->endpoint_min_limit, kC / 2);  // the first throttle halves
  EXPECT_GE(sa->endpoint_min_limit, 1u);
  EXPECT_LE(sa->endpoint_limit, kC);
  EXPECT_GE(sa->endpoint_limit, sa->endpoint_min_limit);
  EXPECT_GT(sa->endpoint_throttled_ns, 0u);
  // b read nothing, but shares a's endpoint.
  EXPECT_EQ(sb->gets, 0u);
  EXPECT_EQ(sb->endpoint_throttles, sa->endpoint_throttles);
  EXPECT_EQ(sb->endpoint_min_limit, sa->endpoint_min_limit);
}

// Off: the old behaviour, retries only, and no endpoint figures.
TEST(AdaptiveHttpTest, OffRetriesAndReportsNoLimit) {
  constexpr uint32_t kC = 16;
  ThrottlingServer server(/*throttle_first=*/4, /*capacity=*/4);
  auto a = OpenHttpSource(server.url(), Http(kC, false));
  ASSERT_TRUE(a.ok());
  ReadAllAndCheck(*a, kC, 200);
  auto s = GetHttpStats(**a);
  ASSERT_TRUE(s.ok());
  EXPECT_GE(s->throttled, 4u);
  EXPECT_EQ(s->retries_throttled, s->throttled);
  EXPECT_EQ(s->endpoint_limit, 0u);
  EXPECT_EQ(s->endpoint_throttles, 0u);
}

// Another endpoint (port) keeps its own limit while one is throttled.
TEST(AdaptiveHttpTest, TheLimitIsPerEndpoint) {
  constexpr uint32_t kC = 8;
  ThrottlingServer throttled(/*throttle_first=*/4, /*capacity=*/2);
  ThrottlingServer free(/*throttle_first=*/0, /*capacity=*/1000);
  auto a = OpenHttpSource(throttled.url(), Http(kC, true));
  auto b = OpenHttpSource(free.url(), Http(kC, true));
  ASSERT_TRUE(a.ok() && b.ok());
  ReadAllAndCheck(*a, kC, 100);
  ReadAllAndCheck(*b, kC, 100);
  auto sa = GetHttpStats(**a);
  auto sb = GetHttpStats(**b);
  ASSERT_TRUE(sa.ok() && sb.ok());
  EXPECT_LE(sa->endpoint_min_limit, kC / 2);
  EXPECT_GT(sa->endpoint_throttles, 0u);
  // b's limit answers to b's latency only: no throttle, no throttled time.
  EXPECT_EQ(sb->endpoint_throttles, 0u);
  EXPECT_EQ(sb->endpoint_throttled_ns, 0u);
  EXPECT_GE(sb->endpoint_limit, 1u);
  EXPECT_LE(sb->endpoint_limit, kC);
}

}  // namespace
}  // namespace rangeio
