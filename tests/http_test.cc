// The HTTP and S3 sources against real servers: the conformance behaviours
// of the local backends (exact bytes of unaligned ranges, the last byte,
// past-the-end ranges, errors naming source and range, cancellation, and the
// core invariants) on http:// (nginx) and s3:// (s3rver and Ceph RGW, each
// path-style and virtual-hosted), each through a pass-through faultproxy
// listener that counts requests by method on the server side; TLS and
// HTTP/2; and a dead or silent server (no test server needed). The S3
// servers' own rules are s3_server_test.cc's.
//
// Needs tests/servers/run_servers.sh (see support/http_servers.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "rangeio/rangeio.h"
#include "support/collecting_sink.h"
#include "support/http_servers.h"
#include "support/http_test_util.h"
#include "support/loopback_server.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

using testing::CollectingSink;
using testing::FastOptions;
using ::testing::HasSubstr;
using testing::HttpBackend;
using testing::kPatternBytes;
using testing::MatchesSeeded;
using ::testing::Not;
using testing::OpenTestObject;
using testing::ProxyListener;
using testing::ReadOnce;

uint64_t Method(const nlohmann::json& stats, const char* method) {
  const auto& m = stats["methods"];
  return m.contains(method) ? m[method].get<uint64_t>() : 0;
}

class HttpConformanceTest : public ::testing::TestWithParam<HttpBackend> {
 protected:
  // A pass-through listener in front of this backend's server.
  static Result<ProxyListener> Counter(const testing::TestServers& s) {
    return ProxyListener::Make(s, testing::UpstreamOf(s, GetParam()));
  }
};

INSTANTIATE_TEST_SUITE_P(Backends, HttpConformanceTest,
                         ::testing::Values(HttpBackend::kNginx,
                                           HttpBackend::kS3Path,
                                           HttpBackend::kS3Vhost,
                                           HttpBackend::kRgwPath,
                                           HttpBackend::kRgwVhost),
                         testing::BackendParamName);

TEST_P(HttpConformanceTest, ReadsExactBytesOfUnalignedRangesAndTheLastByte) {
  RANGEIO_NEED_SERVERS(s);
  RANGEIO_NEED_BACKEND(s, GetParam());
  auto proxy = Counter(s);
  ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
  HttpOptions o = FastOptions();
  o.size_hint = kPatternBytes;
  auto src = OpenTestObject(s, GetParam(), "pattern.bin", o, proxy->base());
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  const uint64_t n = kPatternBytes;
  const std::vector<ByteRange> ranges = {
      {0, 1},    {n - 1, 1},      {0, n},
      {4095, 2}, {123457, 65537}, {n - 100'000, 100'000},
      {7, 0},    {n, 0}};
  CollectingSink sink;
  for (size_t i = 0; i < ranges.size(); ++i) (*src)->Read(ranges[i], &sink, i);
  ASSERT_TRUE(sink.WaitFor(ranges.size(), std::chrono::seconds(30)));
  EXPECT_EQ(sink.duplicates(), 0u);
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto d = sink.Get(i);
    ASSERT_TRUE(d.bytes.ok())
        << ranges[i].ToString() << ": " << d.bytes.status().ToString();
    EXPECT_TRUE(MatchesSeeded(ranges[i], *d.bytes)) << ranges[i].ToString();
  }
  auto st = GetHttpStats(**src);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->gets, 6u);  // zero-length ranges send nothing
  EXPECT_EQ(st->heads, 0u);
  EXPECT_EQ(st->reads_ok, 6u);
  EXPECT_EQ(st->retries(), 0u);
  auto server = proxy->Stats();
  ASSERT_TRUE(server.ok());
  EXPECT_EQ(Method(*server, "GET"), 6u);
  EXPECT_EQ(Method(*server, "HEAD"), 0u);
}

TEST_P(HttpConformanceTest, SizeIsOneGetOfOneByteNeverAHead) {
  RANGEIO_NEED_SERVERS(s);
  RANGEIO_NEED_BACKEND(s, GetParam());
  auto proxy = Counter(s);
  ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
  auto src = OpenTestObject(s, GetParam(), "pattern.bin", FastOptions(),
                            proxy->base());
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  for (int i = 0; i < 3; ++i) {
    auto size = (*src)->Size();
    ASSERT_TRUE(size.ok()) << size.status().ToString();
    EXPECT_EQ(*size, kPatternBytes);
  }
  auto st = GetHttpStats(**src);
  EXPECT_EQ(st->gets, 1u);
  EXPECT_EQ(st->size_probes, 1u);
  auto server = proxy->Stats();
  ASSERT_TRUE(server.ok());
  EXPECT_EQ(Method(*server, "GET"), 1u);
  EXPECT_EQ(Method(*server, "HEAD"), 0u);

  auto empty =
      OpenTestObject(s, GetParam(), "empty.bin", FastOptions(), proxy->base());
  ASSERT_TRUE(empty.ok());
  auto zero = (*empty)->Size();
  ASSERT_TRUE(zero.ok()) << zero.status().ToString();
  EXPECT_EQ(*zero, 0u);
}

TEST_P(HttpConformanceTest, ReaderStreamsManyRangesWithinItsBounds) {
  RANGEIO_NEED_SERVERS(s);
  RANGEIO_NEED_BACKEND(s, GetParam());
  auto proxy = Counter(s);
  ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
  auto src = OpenTestObject(s, GetParam(), "pattern.bin", FastOptions(),
                            proxy->base());
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  auto reader = Reader::Open(*src, testing::LimitOptions(8));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  std::mt19937_64 rng(7);
  std::vector<ByteRange> ranges = {{kPatternBytes - 1, 1}, {0, 1}};
  uint64_t logical = 1 + 1;
  for (int i = 0; i < 298; ++i) {
    const uint64_t len = 1 + rng() % 20'000;
    ranges.push_back({rng() % (kPatternBytes - len + 1), len});
    logical += len;
  }
  for (Delivery d : {Delivery::kOrdered, Delivery::kAsCompleted}) {
    auto stream = reader->ReadRanges(ranges, d);
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    auto out = testing::Drain(*stream, ranges, SimulatedByteAt);
    ASSERT_TRUE(out.status.ok()) << out.status.ToString();
    EXPECT_EQ(out.indexes.size(), ranges.size());
    EXPECT_EQ(out.bad_bytes, 0u);
  }
  const Stats lim = reader->limiter()->GetStats();
  EXPECT_LE(lim.peak_in_flight, 8u);
  EXPECT_LE(lim.peak_retained_count, 16u);
  EXPECT_TRUE(testing::WaitUntil([&] {
    const Stats now = reader->limiter()->GetStats();
    return now.in_flight == 0 && now.retained_count == 0 &&
           now.retained_bytes == 0;
  })) << "permits or budget not returned";
  const HttpStats st = *GetHttpStats(**src);
  EXPECT_EQ(st.gets, 2 * ranges.size() + 1);  // + the size probe
  EXPECT_EQ(st.reads_ok, 2 * ranges.size());
  EXPECT_EQ(st.bytes, 2 * logical + 1);
  EXPECT_EQ(st.latency.count(), 2 * ranges.size());
  EXPECT_GT(st.time_to_first_byte.count(), 0u);
  auto server = proxy->Stats();
  ASSERT_TRUE(server.ok());
  EXPECT_EQ(Method(*server, "GET"), 2 * ranges.size() + 1);
  EXPECT_EQ(Method(*server, "HEAD"), 0u);
}

TEST_P(HttpConformanceTest, RangePastTheEndIsOutOfRangeNamingIt) {
  RANGEIO_NEED_SERVERS(s);
  RANGEIO_NEED_BACKEND(s, GetParam());
  auto src = OpenTestObject(s, GetParam(), "pattern.bin", FastOptions());
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  auto reader = Reader::Open(*src, testing::LimitOptions(4));
  ASSERT_TRUE(reader.ok());
  const std::vector<ByteRange> past = {{0, 10}, {kPatternBytes - 5, 10}};
  auto stream = reader->ReadRanges(past);
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().code(), StatusCode::kOutOfRange);
  EXPECT_THAT(stream.status().message(), HasSubstr((*src)->name()));
  EXPECT_THAT(stream.status().message(),
              HasSubstr(ByteRange{kPatternBytes - 5, 10}.ToString()));
  // The backend's own answer, for a caller that skips the Reader's check.
  auto direct = ReadOnce(**src, {kPatternBytes + 10, 5});
  ASSERT_FALSE(direct.ok());
  EXPECT_EQ(direct.status().code(), StatusCode::kOutOfRange)
      << direct.status().ToString();
  EXPECT_THAT(direct.status().message(), HasSubstr("416"));
  // RGW's 416 InvalidRange states no size (no Content-Range, no
  // ActualObjectSize); the others' do.
  if (!testing::IsRgw(GetParam())) {
    EXPECT_THAT(direct.status().message(),
                HasSubstr("has " + std::to_string(kPatternBytes) + " bytes"));
  } else {
    EXPECT_THAT(direct.status().message(), HasSubstr("InvalidRange"));
  }
}

TEST_P(HttpConformanceTest, MissingObjectIsNotFoundNamingSourceAndRange) {
  RANGEIO_NEED_SERVERS(s);
  RANGEIO_NEED_BACKEND(s, GetParam());
  HttpOptions o = FastOptions();
  o.size_hint = 1000;  // so that the error comes from a read, with a range
  auto src = OpenTestObject(s, GetParam(), "no/such object.bin", o);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  auto reader = Reader::Open(*src, testing::LimitOptions(2));
  ASSERT_TRUE(reader.ok());
  const std::vector<ByteRange> ranges = {{0, 10}};
  auto stream = reader->ReadRanges(ranges);
  ASSERT_TRUE(stream.ok());
  auto out = testing::Drain(*stream);
  ASSERT_FALSE(out.status.ok());
  EXPECT_EQ(out.status.code(), StatusCode::kNotFound) << out.status.ToString();
  const std::string& m = out.status.message();
  EXPECT_THAT(m, HasSubstr((*src)->name()));
  EXPECT_THAT(m, HasSubstr("[0, 10)"));
  EXPECT_THAT(m, HasSubstr("HTTP 404"));
  if (GetParam() != HttpBackend::kNginx) {
    EXPECT_THAT(m, HasSubstr("NoSuchKey"));
    EXPECT_THAT(m, HasSubstr("bucket '" + s.bucket + "'"));
    EXPECT_THAT(m, HasSubstr("key 'no/such object.bin'"));
  }
  // Not retried: a 404 is final.
  EXPECT_EQ(GetHttpStats(**src)->gets, 1u);

  auto probe = OpenTestObject(s, GetParam(), "missing.bin", FastOptions());
  ASSERT_TRUE(probe.ok());
  auto size = (*probe)->Size();
  ASSERT_FALSE(size.ok());
  EXPECT_EQ(size.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(size.status().message(), HasSubstr((*probe)->name()));
}

TEST_P(HttpConformanceTest, CancellingMidwayReturnsEveryPermit) {
  RANGEIO_NEED_SERVERS(s);
  RANGEIO_NEED_BACKEND(s, GetParam());
  auto slow =
      ProxyListener::Make(s, testing::UpstreamOf(s, GetParam()),
                          {{"latency", {{"kind", "fixed"}, {"ms", 20}}}});
  ASSERT_TRUE(slow.ok()) << slow.status().ToString();
  auto src =
      OpenTestObject(s, GetParam(), "pattern.bin", FastOptions(), slow->base());
  ASSERT_TRUE(src.ok());
  auto reader = Reader::Open(*src, testing::LimitOptions(8));
  ASSERT_TRUE(reader.ok());
  const auto ranges = testing::SpreadRanges(200, 3000, 5000);
  {
    auto stream = reader->ReadRanges(ranges, Delivery::kAsCompleted);
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    for (int i = 0; i < 20; ++i) {
      auto next = stream->Next();
      ASSERT_TRUE(next.ok() && next->has_value()) << next.status().ToString();
    }
  }  // dropped with reads in flight
  EXPECT_TRUE(testing::WaitUntil([&] {
    const Stats now = reader->limiter()->GetStats();
    return now.in_flight == 0 && now.retained_count == 0;
  })) << "permits not returned after the stream was dropped";
  const HttpStats st = *GetHttpStats(**src);
  EXPECT_LT(st.reads_ok, 200u);  // the rest was never sent
  // The source still works.
  auto again = reader->ReadRanges(std::vector<ByteRange>{{100, 50}});
  ASSERT_TRUE(again.ok());
  auto out = testing::Drain(*again, std::vector<ByteRange>{{100, 50}},
                            SimulatedByteAt);
  EXPECT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.bad_bytes, 0u);
}

TEST(HttpServerTest, EncodedUrlOfAFileWithASpace) {
  RANGEIO_NEED_SERVERS(s);
  auto src = OpenHttpSource(s.nginx + "/with%20space.bin", FastOptions());
  ASSERT_TRUE(src.ok());
  auto size = (*src)->Size();
  ASSERT_TRUE(size.ok()) << size.status().ToString();
  EXPECT_EQ(*size, kPatternBytes);
  auto bytes = ReadOnce(**src, {kPatternBytes - 3, 3});
  ASSERT_TRUE(bytes.ok());
  EXPECT_TRUE(MatchesSeeded({kPatternBytes - 3, 3}, *bytes));
}

TEST(HttpServerTest, TlsIsVerifiedByDefaultAndHttp2IsUsedWhereOffered) {
  RANGEIO_NEED_SERVERS(s);
  const std::string url = s.nginx_tls + "/pattern.bin";
  // A self-signed certificate: refused unless the caller trusts it.
  auto strict = OpenHttpSource(url, FastOptions());
  ASSERT_TRUE(strict.ok());
  auto refused = (*strict)->Size();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kIoError);
  EXPECT_THAT(refused.status().message(), HasSubstr("certificate"));
  EXPECT_EQ(GetHttpStats(**strict)->gets, 1u);  // not retried

  HttpOptions trusted = FastOptions();
  trusted.ca_file = s.tls_ca;
  HttpOptions unverified = FastOptions();
  unverified.verify_tls = false;
  for (const HttpOptions& o : {trusted, unverified}) {
    auto src = OpenHttpSource(url, o);
    ASSERT_TRUE(src.ok());
    auto size = (*src)->Size();
    ASSERT_TRUE(size.ok()) << size.status().ToString();
    EXPECT_EQ(*size, kPatternBytes);
    CollectingSink sink;
    for (uint64_t i = 0; i < 16; ++i) {
      (*src)->Read({i * 60'000 + 3, 50'000}, &sink, i);
    }
    ASSERT_TRUE(sink.WaitFor(16, std::chrono::seconds(30)));
    for (uint64_t i = 0; i < 16; ++i) {
      auto d = sink.Get(i);
      ASSERT_TRUE(d.bytes.ok()) << d.bytes.status().ToString();
      EXPECT_TRUE(MatchesSeeded({i * 60'000 + 3, 50'000}, *d.bytes));
    }
    const HttpStats st = *GetHttpStats(**src);
    EXPECT_EQ(st.http2_responses, 17u);  // nginx offers h2 over TLS
    EXPECT_EQ(st.gets, 17u);
  }
}

// Issue 16, point 8: https never follows a redirect down to plain http
// (the data would travel unprotected).
TEST(HttpServerTest, HttpsNeverFollowsARedirectToHttp) {
  RANGEIO_NEED_SERVERS(s);
  HttpOptions o = FastOptions();
  o.ca_file = s.tls_ca;
  o.max_attempts = 1;
  auto src = OpenHttpSource(s.nginx_tls + "/redirect-to-http", o);
  ASSERT_TRUE(src.ok());
  auto size = (*src)->Size();
  ASSERT_FALSE(size.ok()) << "followed the redirect: size " << *size;
  EXPECT_EQ(size.status().code(), StatusCode::kIoError);
  EXPECT_THAT(size.status().message(), HasSubstr("redirect-to-http"));
}

TEST(HttpNoServerTest, ServerDownIsAClearConnectionErrorWithinTheDeadline) {
  HttpOptions o = FastOptions();
  o.max_attempts = 4;
  o.deadline = std::chrono::milliseconds(5000);
  // Port 1 (tcpmux) is privileged and unused: nothing listens there, and no
  // test running in parallel can take it (a port picked free could be).
  const std::string url = "http://127.0.0.1:1/x.bin";
  auto src = OpenHttpSource(url, o);
  ASSERT_TRUE(src.ok());
  const auto t0 = std::chrono::steady_clock::now();
  auto size = (*src)->Size();
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(size.ok());
  EXPECT_EQ(size.status().code(), StatusCode::kIoError);
  const std::string& m = size.status().message();
  EXPECT_THAT(m, HasSubstr(url));
  EXPECT_THAT(m, HasSubstr("connect"));
  EXPECT_THAT(m, HasSubstr("4 attempts"));
  EXPECT_LT(took, o.deadline);
  const HttpStats st = *GetHttpStats(**src);
  EXPECT_EQ(st.gets, 4u);
  EXPECT_EQ(st.retries_connection, 3u);
}

TEST(HttpNoServerTest, SilentServerHitsTheFirstByteTimeoutAndTheDeadline) {
  // A listening socket that is never accepted: connects succeed (the kernel
  // completes the handshake), requests go out, no answer ever comes.
  int port = 0;
  const int fd = testing::ListenOnLoopback(&port);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  HttpOptions o = FastOptions();
  o.first_byte_timeout = std::chrono::milliseconds(200);
  o.max_attempts = 3;
  o.size_hint = 100;
  auto src =
      OpenHttpSource("http://127.0.0.1:" + std::to_string(port) + "/x", o);
  ASSERT_TRUE(src.ok());
  const auto t0 = std::chrono::steady_clock::now();
  auto bytes = ReadOnce(**src, {0, 10});
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_FALSE(bytes.ok());
  EXPECT_THAT(bytes.status().message(), HasSubstr("first-byte timeout"));
  EXPECT_THAT(bytes.status().message(), HasSubstr("3 attempts"));
  EXPECT_GE(took, std::chrono::milliseconds(600));
  EXPECT_LT(took, std::chrono::milliseconds(5000));
  EXPECT_EQ(GetHttpStats(**src)->retries_timeout, 2u);

  o.deadline = std::chrono::milliseconds(300);
  o.max_attempts = 100;
  auto bounded =
      OpenHttpSource("http://127.0.0.1:" + std::to_string(port) + "/y", o);
  ASSERT_TRUE(bounded.ok());
  const auto t1 = std::chrono::steady_clock::now();
  auto late = ReadOnce(**bounded, {0, 10});
  const auto took1 = std::chrono::steady_clock::now() - t1;
  ASSERT_FALSE(late.ok());
  EXPECT_THAT(late.status().message(), HasSubstr("deadline"));
  EXPECT_LT(took1, std::chrono::milliseconds(2000));
  ::close(fd);
}

}  // namespace
}  // namespace rangeio
