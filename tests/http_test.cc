// The HTTP and S3 sources against real servers: the conformance behaviours
// of the local backends (exact bytes of unaligned ranges, the last byte,
// past-the-end ranges, errors naming source and range, cancellation, and the
// core invariants) on http:// (nginx) and s3:// (s3rver, path-style and
// virtual-hosted), each through a pass-through faultproxy listener that
// counts requests by method on the server side; S3 errors, keys and
// secrets; and a dead or silent server (no test server needed).
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
using ::testing::HasSubstr;
using testing::HttpBackend;
using testing::kPatternBytes;
using testing::MatchesSeeded;
using ::testing::Not;
using testing::OpenTestObject;
using testing::ProxyListener;
using testing::ReadOnce;

// Short enough that a failing test fails fast, far above loopback latency.
HttpOptions FastOptions() {
  HttpOptions o;
  o.connect_timeout = std::chrono::milliseconds(2000);
  o.first_byte_timeout = std::chrono::milliseconds(5000);
  o.stall_timeout = std::chrono::milliseconds(5000);
  o.retry_base_backoff = std::chrono::milliseconds(5);
  o.retry_max_backoff = std::chrono::milliseconds(100);
  o.deadline = std::chrono::milliseconds(20'000);
  return o;
}

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
                                           HttpBackend::kS3Vhost),
                         [](const auto& p) {
                           switch (p.param) {
                             case HttpBackend::kNginx:
                               return "nginx";
                             case HttpBackend::kS3Path:
                               return "s3_path";
                             case HttpBackend::kS3Vhost:
                               return "s3_vhost";
                           }
                           return "unknown";
                         });

TEST_P(HttpConformanceTest, ReadsExactBytesOfUnalignedRangesAndTheLastByte) {
  RANGEIO_NEED_SERVERS(s);
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
  EXPECT_THAT(direct.status().message(),
              HasSubstr("has " + std::to_string(kPatternBytes) + " bytes"));
}

TEST_P(HttpConformanceTest, MissingObjectIsNotFoundNamingSourceAndRange) {
  RANGEIO_NEED_SERVERS(s);
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

// Every key the seed script uploads (tests/servers/seed.js KEYS).
const char* const kSpecialKeys[] = {
    "pattern.bin",
    "dir/sub/pattern.bin",
    "with space.bin",
    "plus+sign.bin",
    "eq=uals.bin",
    "per%cent.bin",
    "per%20cent.bin",
    "unicod\xc3\xa9 \xe2\x98\x83.bin",
    "mixed dir/a+b=c%d \xc3\xa9 \xe2\x98\x83 ~!*'()&$@,;:.bin",
};

TEST(S3ServerTest, KeysWithSpacesPlusEqualsPercentUnicodeAndSlashes) {
  RANGEIO_NEED_SERVERS(s);
  for (HttpBackend b : {HttpBackend::kS3Path, HttpBackend::kS3Vhost}) {
    for (const char* key : kSpecialKeys) {
      auto src = OpenTestObject(s, b, key, FastOptions());
      ASSERT_TRUE(src.ok()) << key << ": " << src.status().ToString();
      EXPECT_EQ((*src)->name(), "s3://" + s.bucket + "/" + key);
      auto size = (*src)->Size();
      ASSERT_TRUE(size.ok()) << key << ": " << size.status().ToString();
      EXPECT_EQ(*size, kPatternBytes) << key;
      const ByteRange r{777, 4321};
      auto bytes = ReadOnce(**src, r);
      ASSERT_TRUE(bytes.ok()) << key << ": " << bytes.status().ToString();
      EXPECT_TRUE(MatchesSeeded(r, *bytes)) << key;
    }
  }
}

TEST(S3ServerTest, WrongAccessKeyIsInvalidAccessKeyIdWithoutTheSecret) {
  RANGEIO_NEED_SERVERS(s);
  S3Options o = testing::S3TestOptions(s, HttpBackend::kS3Path, FastOptions());
  o.access_key_id = "AKIDWRONG";
  o.secret_access_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYzzSECRET";
  auto src = OpenS3Source("s3://" + s.bucket + "/pattern.bin", o);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  auto size = (*src)->Size();
  ASSERT_FALSE(size.ok());
  EXPECT_EQ(size.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(size.status().message(), HasSubstr("InvalidAccessKeyId"));
  EXPECT_THAT(size.status().message(), HasSubstr("HTTP 403"));
  EXPECT_THAT(size.status().message(), Not(HasSubstr(o.secret_access_key)));
  EXPECT_EQ(GetHttpStats(**src)->gets, 1u);  // a 403 is not retried
}

TEST(S3ServerTest, MissingBucketIsNoSuchBucket) {
  RANGEIO_NEED_SERVERS(s);
  S3Options o = testing::S3TestOptions(s, HttpBackend::kS3Path, FastOptions());
  auto src = OpenS3Source("s3://no-such-bucket-here/pattern.bin", o);
  ASSERT_TRUE(src.ok());
  auto size = (*src)->Size();
  ASSERT_FALSE(size.ok());
  EXPECT_EQ(size.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(size.status().message(), HasSubstr("NoSuchBucket"));
  EXPECT_THAT(size.status().message(), HasSubstr("no-such-bucket-here"));
}

TEST(S3ServerTest, SecretsNeverAppearInErrorsOrStats) {
  RANGEIO_NEED_SERVERS(s);
  const std::string secret = "SeCrEt-never-print-0123456789abcdefghij";
  const std::string token = "ToKeN-never-print-9876543210";
  std::vector<std::string> texts;
  for (const char* key_id : {testing::kS3AccessKey, "AKIDWRONG"}) {
    S3Options o =
        testing::S3TestOptions(s, HttpBackend::kS3Path, FastOptions());
    o.access_key_id = key_id;
    o.secret_access_key = secret;
    o.session_token = token;
    for (const char* key : {"pattern.bin", "missing.bin"}) {
      auto src = OpenS3Source("s3://" + s.bucket + "/" + key, o);
      ASSERT_TRUE(src.ok());
      texts.push_back((*src)->name());
      auto size = (*src)->Size();
      texts.push_back(size.status().ToString());
      auto bytes = ReadOnce(**src, {0, 10});
      texts.push_back(bytes.status().ToString());
      texts.push_back(GetHttpStats(**src)->ToString());
    }
    o.endpoint = "http://127.0.0.1:1";  // nothing listens on port 1
    o.http.max_attempts = 1;
    auto down = OpenS3Source("s3://" + s.bucket + "/pattern.bin", o);
    ASSERT_TRUE(down.ok());
    texts.push_back((*down)->Size().status().ToString());
  }
  bool some_error = false;
  for (const std::string& t : texts) {
    EXPECT_THAT(t, Not(HasSubstr(secret)));
    EXPECT_THAT(t, Not(HasSubstr(token)));
    some_error =
        some_error || t.find("InvalidAccessKeyId") != std::string::npos;
  }
  EXPECT_TRUE(some_error) << "the wrong key id was not rejected";
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
