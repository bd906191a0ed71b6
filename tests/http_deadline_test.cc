// A read's deadline (HttpOptions::deadline) covers every wait of the read,
// not only its attempts: the wait for a slot of its endpoint's adaptive
// limit behind another source's hung request, and the backoff before a
// retry. Loopback servers only (no test servers needed). Assertions are on
// outcomes, error text and the order of events (what the server saw, what
// was still hung when a read ended), never on elapsed time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/endpoint_limit.h"
#include "http/http_source.h"
#include "rangeio/rangeio.h"
#include "support/collecting_sink.h"
#include "support/loopback_server.h"
#include "support/test_util.h"
#include "util/clock.h"

namespace rangeio {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ms = std::chrono::milliseconds;

constexpr uint64_t kObjectBytes = 1 << 20;

// Records the path of every request it reads. A request for a path in
// `answers` gets that answer; any other is held: accepted, read, never
// answered (until the server is destroyed).
class HoldingServer {
 public:
  explicit HoldingServer(
      std::vector<std::pair<std::string, std::string>> answers = {})
      : answers_(std::move(answers)) {}

  std::string url(const std::string& path) const {
    return "http://" + server_.hostport() + path;
  }
  std::vector<std::string> paths() {
    std::lock_guard lk(mu_);
    return paths_;
  }

 private:
  void Serve(int fd) {
    std::string in;
    char buf[4096];
    for (;;) {
      const size_t end = in.find("\r\n\r\n");
      if (end == std::string::npos) {
        const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) return;
        in.append(buf, static_cast<size_t>(n));
        continue;
      }
      // "GET /path HTTP/1.1"
      const size_t from = in.find(' ') + 1;
      const std::string path = in.substr(from, in.find(' ', from) - from);
      in.erase(0, end + 4);
      {
        std::lock_guard lk(mu_);
        paths_.push_back(path);
      }
      for (const auto& [p, answer] : answers_) {
        if (p == path) ::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL);
      }
    }
  }

  const std::vector<std::pair<std::string, std::string>> answers_;
  std::mutex mu_;
  std::vector<std::string> paths_;  // GUARDED_BY(mu_)
  testing::LoopbackServer server_{[this](int fd) { Serve(fd); }};  // last
};

// One slot for the whole endpoint: adaptive, and a ceiling of one
// connection, so a second request to it waits for the first to end.
HttpOptions OneSlot(ms deadline) {
  HttpOptions o;
  o.size_hint = kObjectBytes;
  o.max_connections = 1;
  o.adaptive = true;
  o.max_attempts = 1;
  o.deadline = deadline;
  return o;
}

// A request that hangs far longer than any wait in these tests.
HttpOptions Hung() {
  HttpOptions o = OneSlot(ms(120'000));
  o.first_byte_timeout = ms(60'000);
  return o;
}

// Attempts holding a slot of the endpoint of `url` now.
uint32_t SlotsInUse(const std::string& url) {
  return detail::EndpointLimit::Shared(detail::EndpointOf(url), 1)
      ->Get(detail::NowNanos())
      .in_flight;
}

// The issue: a read queued behind another source's hung request on the same
// endpoint ended only when that request timed out, long after its own
// deadline. It must end at its deadline, while the other is still hung,
// never having been sent, with an error saying what it waited for; its
// Limiter permit and the endpoint's slots all come back.
TEST(HttpDeadlineTest, ReadQueuedForAnEndpointSlotEndsAtItsDeadline) {
  HoldingServer server;
  auto hung = OpenHttpSource(server.url("/hung"), Hung());
  auto queued = OpenHttpSource(server.url("/queued"), OneSlot(ms(300)));
  ASSERT_TRUE(hung.ok() && queued.ok());
  testing::CollectingSink hung_sink;
  (*hung)->Read({0, 100}, &hung_sink, 7);
  ASSERT_TRUE(testing::WaitUntil([&] { return server.paths().size() == 1; }));
  EXPECT_EQ(SlotsInUse(server.url("/")), 1u);

  Reader reader = testing::OpenReader(*queued, testing::LimitOptions(4));
  const ByteRange range{1000, 100};
  auto stream = reader.ReadRanges({&range, 1});
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  testing::StreamConsumer consumer(std::move(*stream));
  // The guard only bounds a hang: it is far below the hung request's 60 s
  // first-byte timeout, the only other way the queued read could end.
  const bool ended = consumer.WaitForDone();
  const bool other_still_hung = !hung_sink.Has(7);
  (*hung)->Cancel(&hung_sink, 7);  // lets the queued read go if it waits on
  ASSERT_TRUE(consumer.WaitForDone());
  ASSERT_TRUE(hung_sink.WaitFor(1));

  EXPECT_TRUE(ended) << "the queued read outlived the hang guard";
  EXPECT_TRUE(other_still_hung)
      << "the queued read ended only once the hung request had";
  const Status st = consumer.final_status();
  EXPECT_EQ(st.code(), StatusCode::kIoError) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr(server.url("/queued")));
  EXPECT_THAT(st.message(), HasSubstr("bytes=1000-1099"));
  EXPECT_THAT(st.message(),
              HasSubstr("timed out waiting for an endpoint slot"));
  EXPECT_THAT(st.message(), HasSubstr("deadline of 300 ms"));
  // Never sent: the server saw the hung request only.
  EXPECT_THAT(server.paths(), ElementsAre("/hung"));
  const HttpStats s = *GetHttpStats(**queued);
  EXPECT_EQ(s.gets, 0u);
  EXPECT_EQ(s.reads_failed, 1u);
  EXPECT_EQ(hung_sink.Get(7).bytes.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(hung_sink.duplicates(), 0u);
  testing::ExpectLimiterDrains(*reader.limiter());
  EXPECT_EQ(SlotsInUse(server.url("/")), 0u);
}

std::string SlowDown(int retry_after_s) {
  const std::string body = "slow down";
  return "HTTP/1.1 503 Service Unavailable\r\nRetry-After: " +
         std::to_string(retry_after_s) +
         "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
         body;
}

// A retry whose backoff (a Retry-After) would end past the deadline is not
// waited for: the read ends with the throttled answer, after one request.
TEST(HttpDeadlineTest, BackoffPastTheDeadlineIsNotWaitedFor) {
  HoldingServer server({{"/x", SlowDown(60)}});
  HttpOptions o = OneSlot(ms(500));
  o.max_attempts = 5;
  auto src = OpenHttpSource(server.url("/x"), o);
  ASSERT_TRUE(src.ok());
  testing::CollectingSink sink;
  (*src)->Read({0, 100}, &sink, 1);
  ASSERT_TRUE(sink.WaitFor(1));  // a hang guard, far below the 60 s wait
  const Status st = sink.Get(1).bytes.status();
  EXPECT_EQ(st.code(), StatusCode::kIoError) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("503"));
  EXPECT_THAT(st.message(),
              HasSubstr("no time for attempt 2 within the deadline of 500 ms"));
  EXPECT_THAT(server.paths(), ElementsAre("/x"));
  EXPECT_EQ(GetHttpStats(**src)->gets, 1u);
  EXPECT_EQ(SlotsInUse(server.url("/")), 0u);
}

// Both waits in one read: a throttled first attempt backs off (Retry-After:
// 1 s), meanwhile another source's request takes the endpoint's one slot
// and hangs; the retry queues for the slot and ends at the read's deadline,
// its error saying so and why the read was retrying.
TEST(HttpDeadlineTest, RetryQueuedForAnEndpointSlotEndsAtTheDeadline) {
  HoldingServer server({{"/retried", SlowDown(1)}});
  HttpOptions o = OneSlot(ms(2500));
  o.max_attempts = 5;
  auto retried = OpenHttpSource(server.url("/retried"), o);
  auto hung = OpenHttpSource(server.url("/hung"), Hung());
  ASSERT_TRUE(retried.ok() && hung.ok());
  testing::CollectingSink sink;
  (*retried)->Read({0, 100}, &sink, 1);
  ASSERT_TRUE(testing::WaitUntil([&] { return server.paths().size() == 1; }));
  (*hung)->Read({0, 100}, &sink, 2);
  ASSERT_TRUE(testing::WaitUntil([&] { return server.paths().size() == 2; }));
  // The hung request took the slot during the backoff, before the retry.
  ASSERT_THAT(server.paths(), ElementsAre("/retried", "/hung"));

  const bool ended = sink.WaitFor(1);  // a hang guard, far below 60 s
  const bool other_still_hung = !sink.Has(2);
  (*hung)->Cancel(&sink, 2);
  ASSERT_TRUE(sink.WaitFor(2));

  EXPECT_TRUE(ended);
  EXPECT_TRUE(other_still_hung);
  EXPECT_EQ(sink.order().front(), 1u);
  const Status st = sink.Get(1).bytes.status();
  EXPECT_EQ(st.code(), StatusCode::kIoError) << st.ToString();
  EXPECT_THAT(st.message(),
              HasSubstr("timed out waiting for an endpoint slot"));
  EXPECT_THAT(st.message(), HasSubstr("retried after: throttled"));
  EXPECT_THAT(st.message(), HasSubstr("503"));
  EXPECT_THAT(server.paths(), ElementsAre("/retried", "/hung"));
  EXPECT_EQ(GetHttpStats(**retried)->gets, 1u);
  EXPECT_EQ(sink.duplicates(), 0u);
  EXPECT_EQ(SlotsInUse(server.url("/")), 0u);
}

}  // namespace
}  // namespace rangeio
