// Faults injected by tests/servers/faultproxy.js between the HTTP/S3
// sources and real servers: 503 SlowDown storms, Retry-After, 5xx, final
// 4xx, a connection reset mid-body, a truncated body, a stalled body, a slow
// first byte, a wrong Content-Range, a 200 to a ranged request, and an
// overall deadline. Each test has a proxy listener of its own. The faults a
// store's answers can meet (throttling, resets, truncation) run in front of
// every server: nginx, s3rver and Ceph RGW (S3FaultTest, ServerFaultTest).
//
// Needs tests/servers/run_servers.sh (see support/http_servers.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "rangeio/rangeio.h"
#include "support/collecting_sink.h"
#include "support/http_servers.h"
#include "support/http_test_util.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

using ::testing::HasSubstr;
using testing::HttpBackend;
using testing::kPatternBytes;
using testing::MatchesSeeded;
using testing::OpenTestObject;
using testing::ProxyListener;
using testing::ReadOnce;
using json = nlohmann::json;
using ms = std::chrono::milliseconds;

HttpOptions RetryingOptions() {
  HttpOptions o;
  o.connect_timeout = ms(2000);
  o.first_byte_timeout = ms(5000);
  o.stall_timeout = ms(5000);
  o.max_attempts = 10;
  o.retry_base_backoff = ms(5);
  o.retry_max_backoff = ms(50);
  o.deadline = ms(20'000);
  o.size_hint = kPatternBytes;
  return o;
}

struct Faulty {
  ProxyListener proxy;
  std::shared_ptr<Source> source;
};

// `object` of `backend` behind a listener with `faults`.
Result<Faulty> Behind(const testing::TestServers& s, HttpBackend backend,
                      json faults, const HttpOptions& o = RetryingOptions(),
                      json latency = {{"kind", "none"}}) {
  RANGEIO_ASSIGN_OR_RETURN(
      ProxyListener proxy,
      ProxyListener::Make(
          s, testing::UpstreamOf(s, backend),
          {{"faults", std::move(faults)}, {"latency", std::move(latency)}}));
  RANGEIO_ASSIGN_OR_RETURN(
      std::shared_ptr<Source> src,
      OpenTestObject(s, backend, "pattern.bin", o, proxy.base()));
  return Faulty{std::move(proxy), std::move(src)};
}

uint64_t Requests(const ProxyListener& p) {
  auto st = p.Stats();
  return st.ok() ? (*st)["requests"].get<uint64_t>() : 0;
}

// Throttling, on both S3 servers.
class S3FaultTest : public ::testing::TestWithParam<HttpBackend> {};
INSTANTIATE_TEST_SUITE_P(Servers, S3FaultTest,
                         ::testing::Values(HttpBackend::kS3Path,
                                           HttpBackend::kRgwPath),
                         testing::BackendParamName);

// A broken body, on every server.
class ServerFaultTest : public ::testing::TestWithParam<HttpBackend> {};
INSTANTIATE_TEST_SUITE_P(Servers, ServerFaultTest,
                         ::testing::Values(HttpBackend::kNginx,
                                           HttpBackend::kS3Path,
                                           HttpBackend::kRgwPath),
                         testing::BackendParamName);

TEST_P(S3FaultTest, SlowDownStormIsRetriedAndSucceedsWithRetriesCounted) {
  RANGEIO_NEED_SERVERS(s);
  RANGEIO_NEED_BACKEND(s, GetParam());
  auto f = Behind(s, GetParam(),
                  json::array({{{"kind", "slowdown"}, {"first", 12}}}));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto reader = Reader::Open(f->source, testing::LimitOptions(4));
  ASSERT_TRUE(reader.ok());
  const auto ranges = testing::SpreadRanges(20, 10'000, 50'000);
  auto stream = reader->ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok());
  auto out = testing::Drain(*stream, ranges, SimulatedByteAt);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.indexes.size(), 20u);
  EXPECT_EQ(out.bad_bytes, 0u);
  const HttpStats st = *GetHttpStats(*f->source);
  EXPECT_EQ(st.retries_throttled, 12u);
  EXPECT_EQ(st.retries(), 12u);
  EXPECT_EQ(st.gets, 32u);
  EXPECT_EQ(st.reads_ok, 20u);
  EXPECT_EQ(Requests(f->proxy), 32u);
}

TEST_P(S3FaultTest, RetryAfterIsHonoured) {
  RANGEIO_NEED_SERVERS(s);
  RANGEIO_NEED_BACKEND(s, GetParam());
  auto f = Behind(
      s, GetParam(),
      json::array({{{"kind", "slowdown"}, {"first", 1}, {"retry_after", 1}}}));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const auto t0 = std::chrono::steady_clock::now();
  auto bytes = ReadOnce(*f->source, {10, 100});
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_TRUE(MatchesSeeded({10, 100}, *bytes));
  EXPECT_GE(took, ms(1000));  // not the 5..50 ms backoff
}

TEST(HttpFaultTest, ServerErrorsAreRetriedButOther4xxAreFinal) {
  RANGEIO_NEED_SERVERS(s);
  auto five = Behind(
      s, HttpBackend::kNginx,
      json::array({{{"kind", "status"}, {"status", 502}, {"first", 2}}}));
  ASSERT_TRUE(five.ok()) << five.status().ToString();
  auto ok = ReadOnce(*five->source, {0, 1000});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(GetHttpStats(*five->source)->retries_5xx, 2u);

  auto four = Behind(s, HttpBackend::kS3Path,
                     json::array({{{"kind", "status"},
                                   {"status", 403},
                                   {"code", "AccessDenied"},
                                   {"message", "Access Denied"}}}));
  ASSERT_TRUE(four.ok());
  auto denied = ReadOnce(*four->source, {0, 1000});
  ASSERT_FALSE(denied.ok());
  EXPECT_EQ(denied.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(denied.status().message(), HasSubstr("AccessDenied"));
  EXPECT_THAT(denied.status().message(), HasSubstr("Access Denied"));
  EXPECT_THAT(denied.status().message(), HasSubstr("key 'pattern.bin'"));
  EXPECT_EQ(Requests(four->proxy), 1u);
  EXPECT_EQ(GetHttpStats(*four->source)->retries(), 0u);
}

TEST_P(ServerFaultTest, ResetMidBodyIsRetriedIntoTheSameBuffer) {
  RANGEIO_NEED_SERVERS(s);
  RANGEIO_NEED_BACKEND(s, GetParam());
  auto f =
      Behind(s, GetParam(),
             json::array(
                 {{{"kind", "reset"}, {"after_bytes", 50'000}, {"first", 2}}}));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const ByteRange r{12'345, 100 * 1024};
  auto bytes = ReadOnce(*f->source, r);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_TRUE(MatchesSeeded(r, *bytes));
  const HttpStats st = *GetHttpStats(*f->source);
  EXPECT_EQ(st.retries_connection, 2u);
  EXPECT_EQ(st.gets, 3u);
}

TEST_P(ServerFaultTest, TruncatedBodyNeverYieldsShortData) {
  RANGEIO_NEED_SERVERS(s);
  RANGEIO_NEED_BACKEND(s, GetParam());
  // Once: retried, and the read gets all its bytes.
  auto once = Behind(
      s, GetParam(),
      json::array(
          {{{"kind", "truncate"}, {"after_bytes", 30'000}, {"first", 1}}}));
  ASSERT_TRUE(once.ok()) << once.status().ToString();
  const ByteRange r{0, 100'000};
  auto bytes = ReadOnce(*once->source, r);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_TRUE(MatchesSeeded(r, *bytes));
  EXPECT_EQ(GetHttpStats(*once->source)->retries_connection, 1u);

  // Always: an error naming the cause, never a short slice.
  HttpOptions o = RetryingOptions();
  o.max_attempts = 3;
  auto always =
      Behind(s, GetParam(),
             json::array({{{"kind", "truncate"}, {"after_bytes", 30'000}}}), o);
  ASSERT_TRUE(always.ok());
  auto reader = Reader::Open(always->source, testing::LimitOptions(2));
  ASSERT_TRUE(reader.ok());
  const std::vector<ByteRange> ranges = {r};
  auto stream = reader->ReadRanges(ranges);
  ASSERT_TRUE(stream.ok());
  auto out = testing::Drain(*stream, {}, nullptr, /*keep_slices=*/true);
  ASSERT_FALSE(out.status.ok()) << "truncated body returned as data";
  EXPECT_TRUE(out.slices.empty());
  EXPECT_EQ(out.status.code(), StatusCode::kIoError);
  EXPECT_THAT(out.status.message(), HasSubstr("[0, 100000)"));
  EXPECT_THAT(out.status.message(), HasSubstr("3 attempts"));
  EXPECT_EQ(GetHttpStats(*always->source)->reads_failed, 1u);
}

TEST(HttpFaultTest, StalledBodyTimesOutAndIsRetried) {
  RANGEIO_NEED_SERVERS(s);
  HttpOptions o = RetryingOptions();
  o.stall_timeout = ms(300);
  auto f = Behind(s, HttpBackend::kNginx,
                  json::array({{{"kind", "stall"},
                                {"after_bytes", 20'000},
                                {"stall_ms", 5000},
                                {"first", 1}}}),
                  o);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const ByteRange r{1000, 80'000};
  const auto t0 = std::chrono::steady_clock::now();
  auto bytes = ReadOnce(*f->source, r);
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_TRUE(MatchesSeeded(r, *bytes));
  EXPECT_EQ(GetHttpStats(*f->source)->retries_timeout, 1u);
  EXPECT_LT(took, ms(3000));  // did not wait out the 5 s stall
}

TEST(HttpFaultTest, SlowFirstByteTimesOutAndIsRetried) {
  RANGEIO_NEED_SERVERS(s);
  HttpOptions o = RetryingOptions();
  o.first_byte_timeout = ms(300);
  auto f =
      Behind(s, HttpBackend::kS3Path,
             json::array({{{"kind", "delay"}, {"ms", 3000}, {"first", 1}}}), o);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const auto t0 = std::chrono::steady_clock::now();
  auto bytes = ReadOnce(*f->source, {5, 5});
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_TRUE(MatchesSeeded({5, 5}, *bytes));
  EXPECT_EQ(GetHttpStats(*f->source)->retries_timeout, 1u);
  EXPECT_LT(took, ms(2500));
}

TEST(HttpFaultTest, MismatchedContentRangeIsAnErrorNotRetried) {
  RANGEIO_NEED_SERVERS(s);
  auto f = Behind(s, HttpBackend::kNginx,
                  json::array({{{"kind", "widen_range"}, {"extra", 100}}}));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto bytes = ReadOnce(*f->source, {1000, 500});
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().code(), StatusCode::kIoError);
  EXPECT_THAT(bytes.status().message(), HasSubstr("bytes=1000-1499"));
  EXPECT_THAT(bytes.status().message(), HasSubstr("bytes 1000-1599/"));
  EXPECT_EQ(Requests(f->proxy), 1u);
}

TEST(HttpFaultTest, WholeObjectAnswerToARangedGetIsAnErrorUnlessAskedFor) {
  RANGEIO_NEED_SERVERS(s);
  auto f =
      Behind(s, HttpBackend::kNginx, json::array({{{"kind", "drop_range"}}}));
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto part = ReadOnce(*f->source, {0, 4096});
  ASSERT_FALSE(part.ok());
  EXPECT_THAT(part.status().message(), HasSubstr("ignored the Range header"));
  EXPECT_THAT(part.status().message(),
              HasSubstr(std::to_string(kPatternBytes) + " bytes"));
  // The whole object asked for and sent whole: that is the answer.
  auto whole = ReadOnce(*f->source, {0, kPatternBytes});
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_TRUE(MatchesSeeded({0, kPatternBytes}, *whole));
}

TEST(HttpFaultTest, OverallDeadlineBoundsRetries) {
  RANGEIO_NEED_SERVERS(s);
  HttpOptions o = RetryingOptions();
  o.max_attempts = 100;
  o.deadline = ms(800);
  auto f =
      Behind(s, HttpBackend::kS3Path, json::array({{{"kind", "slowdown"}}}), o,
             {{"kind", "fixed"}, {"ms", 100}});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const auto t0 = std::chrono::steady_clock::now();
  auto bytes = ReadOnce(*f->source, {0, 10});
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(bytes.ok());
  EXPECT_THAT(bytes.status().message(), HasSubstr("SlowDown"));
  EXPECT_THAT(bytes.status().message(), HasSubstr("deadline of 800 ms"));
  EXPECT_LT(took, ms(1500));
  EXPECT_GE(GetHttpStats(*f->source)->retries_throttled, 2u);
}

// Source::Cancel (a hedge's loser): the transfer leaves the multi handle
// and the read completes with Cancelled long before the proxy's 20 s delay.
TEST(HttpFaultTest, CancelEndsATransferInFlight) {
  RANGEIO_NEED_SERVERS(s);
  auto f = Behind(s, HttpBackend::kNginx, json::array(), RetryingOptions(),
                  {{"kind", "fixed"}, {"ms", 20'000}});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  testing::CollectingSink sink;
  f->source->Read({10, 100}, &sink, 1);
  f->source->Cancel(&sink, 2);  // unknown: ignored
  // Wait until the request is at the proxy, so the transfer is on the wire.
  for (int i = 0; i < 500 && Requests(f->proxy) == 0; ++i) {
    std::this_thread::sleep_for(ms(10));
  }
  ASSERT_EQ(Requests(f->proxy), 1u);
  f->source->Cancel(&sink, 1);
  ASSERT_TRUE(sink.WaitFor(1, ms(5000))) << "the cancelled read did not end";
  EXPECT_EQ(sink.Get(1).bytes.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(sink.duplicates(), 0u);
  const HttpStats st = *GetHttpStats(*f->source);
  EXPECT_EQ(st.reads_failed, 0u);  // a cancelled read is not a failure
  EXPECT_EQ(st.reads_ok, 0u);
}

}  // namespace
}  // namespace rangeio
