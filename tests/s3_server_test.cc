// The S3 servers against rangeio's S3 source: s3rver (a mock that checks
// the key id, not signatures) and Ceph RGW (a real object store that checks
// every signature), each path-style and virtual-hosted: keys with special
// characters, wrong key id and wrong secret, a session token, missing
// buckets, a Range changed in transit, and secrets kept out of every text.
//
// Needs tests/servers/run_servers.sh (see support/http_servers.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rangeio/rangeio.h"
#include "support/http_servers.h"
#include "support/http_test_util.h"

namespace rangeio {
namespace {

using testing::FastOptions;
using ::testing::HasSubstr;
using testing::HttpBackend;
using testing::kPatternBytes;
using testing::MatchesSeeded;
using ::testing::Not;
using testing::OpenTestObject;
using testing::ProxyListener;
using testing::ReadOnce;

// The S3 servers, each with path-style and virtual-hosted addressing:
// s3rver (a mock) and Ceph RGW (a real object store that checks every
// signature).
class S3ServerTest : public ::testing::TestWithParam<HttpBackend> {
 protected:
  // The options of this backend with the test user's keys.
  S3Options Options(const testing::TestServers& s,
                    const std::string& endpoint = "") const {
    return testing::S3TestOptions(s, GetParam(), endpoint);
  }
};

INSTANTIATE_TEST_SUITE_P(Servers, S3ServerTest,
                         ::testing::Values(HttpBackend::kS3Path,
                                           HttpBackend::kS3Vhost,
                                           HttpBackend::kRgwPath,
                                           HttpBackend::kRgwVhost),
                         testing::BackendParamName);

TEST_P(S3ServerTest, KeysWithSpacesPlusEqualsPercentDotsUnicodeAndSlashes) {
  RANGEIO_NEED_SERVERS(s);
  RANGEIO_NEED_BACKEND(s, GetParam());
  for (const char* key : testing::kSeededKeys) {
    auto src = OpenTestObject(s, GetParam(), key, FastOptions());
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

TEST_P(S3ServerTest, WrongAccessKeyIsInvalidAccessKeyIdWithoutTheSecret) {
  RANGEIO_NEED_SERVERS(s);
  RANGEIO_NEED_BACKEND(s, GetParam());
  S3Options o = Options(s);
  o.access_key_id = "AKIDWRONG";
  o.secret_access_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYzzSECRET";
  auto src =
      OpenS3Source("s3://" + s.bucket + "/pattern.bin", o, FastOptions());
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  auto size = (*src)->Size();
  ASSERT_FALSE(size.ok());
  EXPECT_EQ(size.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(size.status().message(), HasSubstr("InvalidAccessKeyId"));
  EXPECT_THAT(size.status().message(), HasSubstr("HTTP 403"));
  EXPECT_THAT(size.status().message(), Not(HasSubstr(o.secret_access_key)));
  EXPECT_EQ(GetHttpStats(**src)->gets, 1u);  // a 403 is not retried
}

// The proof that a signature is checked at all: the right key id signed
// with another secret. RGW refuses it; s3rver (a mock) serves it, which is
// why the suite also runs against RGW.
TEST_P(S3ServerTest, WrongSecretIsSignatureDoesNotMatchWhereSignaturesCount) {
  RANGEIO_NEED_SERVERS(s);
  RANGEIO_NEED_BACKEND(s, GetParam());
  S3Options o = Options(s);
  o.secret_access_key = "not-the-secret-" + o.secret_access_key;
  auto src =
      OpenS3Source("s3://" + s.bucket + "/pattern.bin", o, FastOptions());
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  auto bytes = ReadOnce(**src, {10, 100});
  if (!testing::VerifiesSignatures(GetParam())) {
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    EXPECT_TRUE(MatchesSeeded({10, 100}, *bytes));
    return;
  }
  ASSERT_FALSE(bytes.ok());
  EXPECT_EQ(bytes.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(bytes.status().message(), HasSubstr("HTTP 403"));
  EXPECT_THAT(bytes.status().message(), HasSubstr("SignatureDoesNotMatch"));
  EXPECT_THAT(bytes.status().message(), Not(HasSubstr(o.secret_access_key)));
  EXPECT_EQ(GetHttpStats(**src)->gets, 1u);  // a 403 is not retried
}

// A Range header changed in transit (the fault proxy widens it). libcurl's
// SigV4 signs host and the x-amz-* headers, not Range (botocore signs it),
// so even RGW serves the wider range; what stops it is the check of the
// answer's Content-Range against the request: an error, never wrong bytes.
TEST_P(S3ServerTest, RangeChangedInTransitIsCaughtByTheContentRangeCheck) {
  RANGEIO_NEED_SERVERS(s);
  RANGEIO_NEED_BACKEND(s, GetParam());
  auto proxy = ProxyListener::Make(
      s, testing::UpstreamOf(s, GetParam()),
      {{"faults", nlohmann::json::array({{{"kind", "widen_range"}}})}});
  ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
  auto src = OpenS3Source("s3://" + s.bucket + "/pattern.bin",
                          Options(s, proxy->base()), FastOptions());
  ASSERT_TRUE(src.ok());
  auto bytes = ReadOnce(**src, {10, 100});
  ASSERT_FALSE(bytes.ok()) << "a widened range was returned as data";
  EXPECT_EQ(bytes.status().code(), StatusCode::kIoError);
  EXPECT_THAT(bytes.status().message(),
              HasSubstr("asked for bytes=10-109, got 206 with Content-Range "
                        "'bytes 10-209/"));
}

// A session token goes out as x-amz-security-token, among the signed
// headers (RGW, which checks the signature, accepts it: without STS it does
// not check the token itself).
TEST_P(S3ServerTest, SessionTokenIsSentAndSigned) {
  RANGEIO_NEED_SERVERS(s);
  RANGEIO_NEED_BACKEND(s, GetParam());
  auto proxy = ProxyListener::Make(s, testing::UpstreamOf(s, GetParam()),
                                   {{"capture", true}});
  ASSERT_TRUE(proxy.ok()) << proxy.status().ToString();
  S3Options o = Options(s, proxy->base());
  o.session_token = "FwoGZXIvYXdzEJr//////////wEaDM+token=";
  auto src =
      OpenS3Source("s3://" + s.bucket + "/pattern.bin", o, FastOptions());
  ASSERT_TRUE(src.ok());
  auto bytes = ReadOnce(**src, {10, 100});
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_TRUE(MatchesSeeded({10, 100}, *bytes));
  auto stats = proxy->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  ASSERT_EQ((*stats)["captured"].size(), 1u);
  const auto& headers = (*stats)["captured"][0]["headers"];
  EXPECT_EQ(headers.value("x-amz-security-token", ""), o.session_token);
  EXPECT_THAT(headers.value("authorization", ""),
              HasSubstr("x-amz-security-token"));
}

TEST_P(S3ServerTest, MissingBucketIsNoSuchBucket) {
  RANGEIO_NEED_SERVERS(s);
  RANGEIO_NEED_BACKEND(s, GetParam());
  auto src = OpenS3Source("s3://no-such-bucket-here/pattern.bin", Options(s),
                          FastOptions());
  ASSERT_TRUE(src.ok());
  auto size = (*src)->Size();
  ASSERT_FALSE(size.ok());
  EXPECT_EQ(size.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(size.status().message(), HasSubstr("NoSuchBucket"));
  EXPECT_THAT(size.status().message(), HasSubstr("no-such-bucket-here"));
}

TEST_P(S3ServerTest, SecretsNeverAppearInErrorsOrStats) {
  RANGEIO_NEED_SERVERS(s);
  RANGEIO_NEED_BACKEND(s, GetParam());
  const std::string secret = "SeCrEt-never-print-0123456789abcdefghij";
  const std::string token = "ToKeN-never-print-9876543210";
  std::vector<std::string> texts;
  const std::string right_id = Options(s).access_key_id;
  for (const std::string& key_id : {right_id, std::string("AKIDWRONG")}) {
    S3Options o = Options(s);
    o.access_key_id = key_id;
    o.secret_access_key = secret;
    o.session_token = token;
    for (const char* key : {"pattern.bin", "missing.bin"}) {
      auto src = OpenS3Source("s3://" + s.bucket + "/" + key, o, FastOptions());
      ASSERT_TRUE(src.ok());
      texts.push_back((*src)->name());
      auto size = (*src)->Size();
      texts.push_back(size.status().ToString());
      auto bytes = ReadOnce(**src, {0, 10});
      texts.push_back(bytes.status().ToString());
      texts.push_back(GetHttpStats(**src)->ToString());
    }
    o.endpoint = "http://127.0.0.1:1";  // nothing listens on port 1
    HttpOptions once = FastOptions();
    once.max_attempts = 1;
    auto down = OpenS3Source("s3://" + s.bucket + "/pattern.bin", o, once);
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

}  // namespace
}  // namespace rangeio
