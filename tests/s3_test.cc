// The S3 rules that need no server: s3:// URLs, key encoding, endpoints and
// addressing, credential, region and endpoint resolution, the XML error
// body and what its codes mean to the transport; and option checks of the
// HTTP/S3 sources.
#include "s3/s3.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>

#include "rangeio/rangeio.h"
#include "s3/s3_dialect.h"

namespace rangeio::detail {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// An environment made of a map.
EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return
      [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
        auto it = vars.find(name);
        if (it == vars.end() || it->second.empty()) return std::nullopt;
        return it->second;
      };
}

TEST(S3UrlTest, ParsesBucketAndVerbatimKey) {
  auto loc = ParseS3Url("s3://my-bucket/dir/a b+c=d%20e.bin");
  ASSERT_TRUE(loc.ok()) << loc.status().ToString();
  EXPECT_EQ(loc->bucket, "my-bucket");
  EXPECT_EQ(loc->key, "dir/a b+c=d%20e.bin");  // no percent-decoding
  auto slash = ParseS3Url("s3://b/a//b/");
  ASSERT_TRUE(slash.ok());
  EXPECT_EQ(slash->key, "a//b/");
}

TEST(S3UrlTest, RejectsMalformedUrlsNamingThem) {
  for (const char* bad : {"s3://", "s3://bucket", "s3://bucket/", "http://b/k",
                          "s3:/b/k", "s3://bad bucket/k", "s3:///key"}) {
    auto loc = ParseS3Url(bad);
    ASSERT_FALSE(loc.ok()) << bad;
    EXPECT_EQ(loc.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(loc.status().message(), HasSubstr(bad));
  }
  EXPECT_FALSE(ParseS3Url("s3://b/" + std::string(1025, 'k')).ok());
}

TEST(S3KeyEncodingTest, KeepsUnreservedAndSlashEncodesEverythingElse) {
  EXPECT_EQ(EncodeS3Key("AZaz09-_.~/x"), "AZaz09-_.~/x");
  EXPECT_EQ(EncodeS3Key("with space.bin"), "with%20space.bin");
  EXPECT_EQ(EncodeS3Key("plus+sign"), "plus%2Bsign");
  EXPECT_EQ(EncodeS3Key("eq=uals"), "eq%3Duals");
  EXPECT_EQ(EncodeS3Key("per%cent"), "per%25cent");
  EXPECT_EQ(EncodeS3Key("per%20cent"), "per%2520cent");
  EXPECT_EQ(EncodeS3Key("unicod\xc3\xa9 \xe2\x98\x83"),
            "unicod%C3%A9%20%E2%98%83");
  EXPECT_EQ(EncodeS3Key("a/../b/./c"), "a/../b/./c");
  EXPECT_EQ(EncodeS3Key("!*'()&$@,;:?#[]"),
            "%21%2A%27%28%29%26%24%40%2C%3B%3A%3F%23%5B%5D");
}

TEST(S3EndpointTest, ParsesAndChoosesAddressing) {
  auto aws = ParseS3Endpoint("https://s3.eu-west-1.amazonaws.com/");
  ASSERT_TRUE(aws.ok()) << aws.status().ToString();
  EXPECT_TRUE(aws->aws);
  EXPECT_EQ(aws->authority, "s3.eu-west-1.amazonaws.com");
  auto local = ParseS3Endpoint("http://127.0.0.1:9000");
  ASSERT_TRUE(local.ok());
  EXPECT_FALSE(local->aws);
  EXPECT_EQ(local->host, "127.0.0.1");

  EXPECT_TRUE(UseVirtualHosted(S3Addressing::kAuto, *aws, "my-bucket"));
  EXPECT_FALSE(UseVirtualHosted(S3Addressing::kAuto, *aws, "my.bucket"));
  EXPECT_FALSE(UseVirtualHosted(S3Addressing::kAuto, *aws, "My_Bucket"));
  EXPECT_FALSE(UseVirtualHosted(S3Addressing::kAuto, *local, "my-bucket"));
  EXPECT_TRUE(UseVirtualHosted(S3Addressing::kVirtualHosted, *local, "b"));
  EXPECT_FALSE(UseVirtualHosted(S3Addressing::kPath, *aws, "my-bucket"));

  const S3Location loc{"bkt", "a b/c+d"};
  EXPECT_EQ(S3ObjectUrl(*local, loc, false),
            "http://127.0.0.1:9000/bkt/a%20b/c%2Bd");
  EXPECT_EQ(S3ObjectUrl(*aws, loc, true),
            "https://bkt.s3.eu-west-1.amazonaws.com/a%20b/c%2Bd");

  for (const char* bad : {"127.0.0.1:9000", "ftp://h", "http://", "http://h/p",
                          "http://u:p@h", "http://h?x=1"}) {
    auto ep = ParseS3Endpoint(bad);
    EXPECT_FALSE(ep.ok()) << bad;
    EXPECT_EQ(ep.status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(S3ResolveTest, RegionAndEndpointFollowTheAwsTools) {
  S3Options o;
  EXPECT_EQ(ResolveS3Region(o, FakeEnv({})), "us-east-1");
  EXPECT_EQ(ResolveS3Region(o, FakeEnv({{"AWS_DEFAULT_REGION", "eu-west-3"}})),
            "eu-west-3");
  EXPECT_EQ(ResolveS3Region(o, FakeEnv({{"AWS_REGION", "ap-south-1"},
                                        {"AWS_DEFAULT_REGION", "eu-west-3"}})),
            "ap-south-1");
  o.region = "us-west-2";
  EXPECT_EQ(ResolveS3Region(o, FakeEnv({{"AWS_REGION", "ap-south-1"}})),
            "us-west-2");

  S3Options e;
  EXPECT_EQ(ResolveS3EndpointUrl(e, "eu-west-1", FakeEnv({})),
            "https://s3.eu-west-1.amazonaws.com");
  EXPECT_EQ(ResolveS3EndpointUrl(
                e, "r", FakeEnv({{"AWS_ENDPOINT_URL", "http://minio:9000"}})),
            "http://minio:9000");
  EXPECT_EQ(
      ResolveS3EndpointUrl(e, "r",
                           FakeEnv({{"AWS_ENDPOINT_URL", "http://a"},
                                    {"AWS_ENDPOINT_URL_S3", "http://b"}})),
      "http://b");
  e.endpoint = "http://c";
  EXPECT_EQ(ResolveS3EndpointUrl(e, "r", FakeEnv({{"AWS_ENDPOINT_URL", "x"}})),
            "http://c");
}

class CredentialsFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "rangeio_creds_" +
            std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    FILE* f = std::fopen(path_.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(
        "# comment\n"
        "[default]\n"
        "aws_access_key_id = DEFAULTID\n"
        "aws_secret_access_key = default-secret-XYZ\n"
        "\n"
        "[work]\n"
        "AWS_ACCESS_KEY_ID=WORKID\n"
        "aws_secret_access_key=work-secret-XYZ\n"
        "aws_session_token = work-token-XYZ\n"
        "[half]\n"
        "aws_access_key_id = HALFID\n",
        f);
    std::fclose(f);
  }
  void TearDown() override { std::remove(path_.c_str()); }
  std::string path_;
};

TEST_F(CredentialsFileTest, ExplicitOptionsComeFirst) {
  S3Options o;
  o.access_key_id = "OPTID";
  o.secret_access_key = "opt-secret";
  auto c = ResolveS3Credentials(
      o, FakeEnv({{"AWS_ACCESS_KEY_ID", "ENVID"},
                  {"AWS_SECRET_ACCESS_KEY", "env-secret"}}));
  ASSERT_TRUE(c.ok() && c->has_value());
  EXPECT_EQ((*c)->access_key_id, "OPTID");
  o.secret_access_key.clear();
  EXPECT_EQ(ResolveS3Credentials(o, FakeEnv({})).status().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(CredentialsFileTest, EnvironmentBeforeTheFile) {
  auto c = ResolveS3Credentials(
      {}, FakeEnv({{"AWS_ACCESS_KEY_ID", "ENVID"},
                   {"AWS_SECRET_ACCESS_KEY", "env-secret"},
                   {"AWS_SESSION_TOKEN", "env-token"},
                   {"AWS_SHARED_CREDENTIALS_FILE", path_}}));
  ASSERT_TRUE(c.ok() && c->has_value()) << c.status().ToString();
  EXPECT_EQ((*c)->access_key_id, "ENVID");
  EXPECT_EQ((*c)->secret_access_key, "env-secret");
  EXPECT_EQ((*c)->session_token, "env-token");
  auto half = ResolveS3Credentials({}, FakeEnv({{"AWS_ACCESS_KEY_ID", "X"}}));
  EXPECT_EQ(half.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(CredentialsFileTest, ProfilesOfTheSharedFile) {
  auto def = ResolveS3Credentials(
      {}, FakeEnv({{"AWS_SHARED_CREDENTIALS_FILE", path_}}));
  ASSERT_TRUE(def.ok() && def->has_value()) << def.status().ToString();
  EXPECT_EQ((*def)->access_key_id, "DEFAULTID");
  EXPECT_EQ((*def)->secret_access_key, "default-secret-XYZ");

  auto work =
      ResolveS3Credentials({}, FakeEnv({{"AWS_SHARED_CREDENTIALS_FILE", path_},
                                        {"AWS_PROFILE", "work"}}));
  ASSERT_TRUE(work.ok() && work->has_value());
  EXPECT_EQ((*work)->access_key_id, "WORKID");
  EXPECT_EQ((*work)->session_token, "work-token-XYZ");

  // An explicit profile wins over the environment's keys.
  S3Options o;
  o.profile = "work";
  auto opt = ResolveS3Credentials(
      o, FakeEnv({{"AWS_SHARED_CREDENTIALS_FILE", path_},
                  {"AWS_ACCESS_KEY_ID", "ENVID"},
                  {"AWS_SECRET_ACCESS_KEY", "env-secret"}}));
  ASSERT_TRUE(opt.ok() && opt->has_value());
  EXPECT_EQ((*opt)->access_key_id, "WORKID");
}

TEST_F(CredentialsFileTest, MissingOrHalfProfilesAreErrorsWithoutSecrets) {
  S3Options o;
  o.profile = "nope";
  auto missing = ResolveS3Credentials(
      o, FakeEnv({{"AWS_SHARED_CREDENTIALS_FILE", path_}}));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("nope"));
  o.profile = "half";
  auto half = ResolveS3Credentials(
      o, FakeEnv({{"AWS_SHARED_CREDENTIALS_FILE", path_}}));
  ASSERT_FALSE(half.ok());
  EXPECT_THAT(half.status().message(), Not(HasSubstr("secret-XYZ")));
  // No file and no profile asked for: simply no credentials.
  auto none = ResolveS3Credentials(
      {}, FakeEnv({{"AWS_SHARED_CREDENTIALS_FILE", path_ + ".absent"}}));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(S3ErrorBodyTest, ExtractsCodeMessageAndSizeTolerantly) {
  auto e = ParseS3ErrorBody(
      "<?xml version=\"1.0\"?>\n<Error><Code>NoSuchKey</Code>"
      "<Message>The key &apos;a&amp;b&apos; &lt;does not&gt; exist&#46;"
      "</Message><Key>a&amp;b</Key></Error>");
  EXPECT_EQ(e.code, "NoSuchKey");
  EXPECT_EQ(e.message, "The key 'a&b' <does not> exist.");
  auto r = ParseS3ErrorBody(
      "<Error><Code>InvalidRange</Code><ActualObjectSize>0</ActualObjectSize>"
      "</Error>");
  EXPECT_EQ(r.actual_object_size, "0");
  EXPECT_EQ(ParseS3ErrorBody("not xml").code, "");
  EXPECT_EQ(ParseS3ErrorBody("<Code>unterminated").code, "");
}

// Weakness 10: a <Message> whose entities decode to a newline or an escape
// sequence, or that runs for megabytes, is escaped and bounded in errors.
TEST(S3DialectTest, ServerTextInErrorsIsEscapedAndBounded) {
  S3Dialect anonymous("us-east-1", nullptr);
  ASSERT_TRUE(anonymous.Init().ok());
  const ErrorDetail d = anonymous.ReadErrorBody(
      "<Error><Code>Bad&#10;Code</Code><Message>line&#10;Forged: "
      "yes&#27;[31m" +
      std::string(10'000, 'm') + "</Message></Error>");
  EXPECT_THAT(d.text, Not(HasSubstr("\n")));
  EXPECT_EQ(d.text.find('\n'), std::string::npos);
  EXPECT_EQ(d.text.find('\x1b'), std::string::npos);
  EXPECT_THAT(d.text, HasSubstr("line\\x0aForged: yes\\x1b[31m"));
  EXPECT_THAT(d.text, HasSubstr("Bad\\x0aCode"));
  EXPECT_LT(d.text.size(), 1000u);
}

// Bug 4: a FIFO as the credentials file is refused at once, never waited on
// (open() of a FIFO for reading blocks until a writer comes).
TEST(S3ResolveTest, CredentialsFileThatIsAFifoIsRefusedWithoutBlocking) {
  const std::string fifo =
      ::testing::TempDir() + "rangeio_creds_fifo_" + std::to_string(::getpid());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto c = ResolveS3Credentials(
      {},
      FakeEnv({{"AWS_SHARED_CREDENTIALS_FILE", fifo}, {"AWS_PROFILE", "p"}}));
  std::remove(fifo.c_str());
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("not a regular file"));
  EXPECT_THAT(c.status().message(), HasSubstr(fifo));
}

// Weakness 9: CR/LF in any credential, from any source, is refused (it
// would become a header of the value's choosing).
TEST(S3ResolveTest, ControlCharactersInCredentialsAreRefusedUnshown) {
  auto env = ResolveS3Credentials(
      {}, FakeEnv({{"AWS_ACCESS_KEY_ID", "AKID"},
                   {"AWS_SECRET_ACCESS_KEY", "secret"},
                   {"AWS_SESSION_TOKEN", "tok\r\nX-Evil: 1"}}));
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(env.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(env.status().message(), HasSubstr("session token"));
  EXPECT_THAT(env.status().message(), HasSubstr("environment"));
  EXPECT_THAT(env.status().message(), Not(HasSubstr("X-Evil")));
  auto id =
      ResolveS3Credentials({}, FakeEnv({{"AWS_ACCESS_KEY_ID", "AK\nID"},
                                        {"AWS_SECRET_ACCESS_KEY", "secret"}}));
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(id.status().message(), HasSubstr("access key id"));
}

TEST(S3DialectTest, ErrorCodesOverrideTheHttpStatusWhereTheyMeanMore) {
  EXPECT_EQ(StatusCodeOfS3Error("NoSuchKey"), StatusCode::kNotFound);
  EXPECT_EQ(StatusCodeOfS3Error("NoSuchBucket"), StatusCode::kNotFound);
  EXPECT_EQ(RetryCauseOfS3Error("SlowDown"), RetryCause::kThrottled);
  for (const char* code :
       {"", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch",
        "InternalError", "InvalidRange", "nosuchkey"}) {
    EXPECT_FALSE(StatusCodeOfS3Error(code).has_value()) << code;
    EXPECT_FALSE(RetryCauseOfS3Error(code).has_value()) << code;
  }
}

TEST(S3DialectTest, ErrorAnswersNameTheCodeAndMapIt) {
  S3Dialect anonymous("us-east-1", nullptr);
  ASSERT_TRUE(anonymous.Init().ok());
  const std::string_view what = "GET http://s3/b/k (bucket 'b', key 'k')";
  auto judge = [&](long status, std::string body) {
    Response r;
    r.status = status;
    r.error_body = std::move(body);
    return JudgeAnswer(what, {0, 10}, false, r, &anonymous, 0);
  };
  Attempt a = judge(404,
                    "<Error><Code>NoSuchKey</Code><Message>The specified "
                    "key does not exist.</Message></Error>");
  EXPECT_EQ(a.status.code(), StatusCode::kNotFound);
  EXPECT_EQ(a.status.message(),
            "GET http://s3/b/k (bucket 'b', key 'k'): HTTP 404 Not Found, S3 "
            "error NoSuchKey: The specified key does not exist.");
  EXPECT_EQ(a.cause, RetryCause::kNone);

  // A store that answers a missing key with 403 still says NotFound.
  EXPECT_EQ(judge(403, "<Error><Code>NoSuchKey</Code></Error>").status.code(),
            StatusCode::kNotFound);

  a = judge(403,
            "<Error><Code>AccessDenied</Code><Message>Access "
            "Denied</Message></Error>");
  EXPECT_EQ(a.status.code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(a.status.message(),
              HasSubstr("HTTP 403 Forbidden, S3 error AccessDenied: Access "
                        "Denied"));
  EXPECT_EQ(a.cause, RetryCause::kNone);

  a = judge(503, "<Error><Code>SlowDown</Code></Error>");
  EXPECT_EQ(a.status.code(), StatusCode::kIoError);
  EXPECT_EQ(a.cause, RetryCause::kThrottled);
  // SlowDown is a throttle whatever status carries it.
  EXPECT_EQ(judge(400, "<Error><Code>SlowDown</Code></Error>").cause,
            RetryCause::kThrottled);
  EXPECT_EQ(judge(500, "<Error><Code>InternalError</Code></Error>").cause,
            RetryCause::k5xx);

  a = judge(416,
            "<Error><Code>InvalidRange</Code><ActualObjectSize>3"
            "</ActualObjectSize></Error>");
  EXPECT_EQ(a.status.code(), StatusCode::kOutOfRange);
  EXPECT_THAT(a.status.message(),
              HasSubstr("S3 error InvalidRange (the object has 3 bytes)"));
  EXPECT_EQ(judge(502, "not xml").status.message(),
            std::string(what) + ": HTTP 502 Bad Gateway");
}

TEST(S3DialectTest, AnEmptyObjectsSizeProbeSucceedsOnInvalidRange) {
  S3Dialect anonymous("us-east-1", nullptr);
  ASSERT_TRUE(anonymous.Init().ok());
  Response r;
  r.status = 416;
  r.error_body =
      "<Error><Code>InvalidRange</Code><ActualObjectSize>0</ActualObjectSize>"
      "</Error>";
  Attempt a = JudgeAnswer("GET x", {0, 1}, true, r, &anonymous, 0);
  EXPECT_TRUE(a.status.ok()) << a.status.ToString();
  EXPECT_EQ(a.object_size, 0u);
}

TEST(HttpOptionsTest, InvalidValuesNameTheField) {
  struct Case {
    void (*mutate)(HttpOptions&);
    const char* field;
  };
  const Case cases[] = {
      {[](HttpOptions& o) { o.connect_timeout = std::chrono::milliseconds(0); },
       "connect_timeout"},
      {[](HttpOptions& o) { o.stall_timeout = std::chrono::milliseconds(-1); },
       "stall_timeout"},
      {[](HttpOptions& o) { o.max_attempts = 0; }, "max_attempts"},
      {[](HttpOptions& o) { o.max_connections = 5000; }, "max_connections"},
      {[](HttpOptions& o) {
         o.retry_base_backoff = std::chrono::milliseconds(100);
         o.retry_max_backoff = std::chrono::milliseconds(10);
       },
       "retry_max_backoff"},
      {[](HttpOptions& o) { o.deadline = std::chrono::milliseconds(0); },
       "deadline"},
  };
  EXPECT_TRUE(HttpOptions{}.Validate().ok());
  for (const Case& c : cases) {
    HttpOptions o;
    c.mutate(o);
    Status st = o.Validate();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(st.message(), HasSubstr(c.field));
    auto src = OpenHttpSource("http://127.0.0.1:1/x", o);
    EXPECT_EQ(src.status().code(), StatusCode::kInvalidArgument) << c.field;
    auto s3 = OpenS3Source("s3://b/k", S3Options(), o);
    EXPECT_THAT(s3.status().message(), HasSubstr(c.field));
  }
}

TEST(HttpOpenTest, RejectsBadUrlsBeforeAnyIo) {
  for (const char* bad :
       {"", "ftp://h/x", "127.0.0.1/x", "http://", "file:///etc"}) {
    auto src = OpenHttpSource(bad);
    ASSERT_FALSE(src.ok()) << bad;
    EXPECT_EQ(src.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  auto s3 = OpenS3Source("s3://bucket-only");
  EXPECT_EQ(s3.status().code(), StatusCode::kInvalidArgument);
  S3Options o;
  o.endpoint = "not a url";
  o.anonymous = true;
  EXPECT_EQ(OpenS3Source("s3://b/k", o).status().code(),
            StatusCode::kInvalidArgument);
  o.endpoint = "http://127.0.0.1:1";
  o.region = "bad:region";
  EXPECT_EQ(OpenS3Source("s3://b/k", o).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(HttpOpenTest, NameAndErrorsHideAUrlPassword) {
  HttpOptions o;
  o.max_attempts = 1;
  auto src = OpenHttpSource("http://user:hunter2@127.0.0.1:1/data.bin", o);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  EXPECT_THAT((*src)->name(), Not(HasSubstr("hunter2")));
  EXPECT_THAT((*src)->name(), HasSubstr("127.0.0.1:1/data.bin"));
  auto size = (*src)->Size();  // nothing listens on port 1
  ASSERT_FALSE(size.ok());
  EXPECT_THAT(size.status().message(), HasSubstr("127.0.0.1:1/data.bin"));
  EXPECT_THAT(size.status().message(), Not(HasSubstr("hunter2")));
  auto stats = GetHttpStats(**src);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->gets, 1u);  // the size probe; opening sent nothing
  auto mem = MakeMemorySource("mem", Slice());
  EXPECT_EQ(GetHttpStats(*mem).status().code(), StatusCode::kInvalidArgument);
}

TEST(HttpOpenTest, SizeHintAnswersSizeWithoutARequest) {
  HttpOptions o;
  o.size_hint = 12345;
  auto src = OpenHttpSource("http://127.0.0.1:1/x", o);
  ASSERT_TRUE(src.ok());
  auto size = (*src)->Size();
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, 12345u);
  EXPECT_EQ(GetHttpStats(**src)->gets, 0u);
}

TEST(HttpOpenTest, NoCredentialsIsPermissionDeniedUnlessAnonymous) {
  // Only meaningful without ambient credentials (CI has none).
  if (ProcessEnv("AWS_ACCESS_KEY_ID") || ProcessEnv("AWS_PROFILE") ||
      ProcessEnv("AWS_SHARED_CREDENTIALS_FILE")) {
    GTEST_SKIP() << "AWS credentials are set in this environment";
  }
  S3Options o;
  o.endpoint = "http://127.0.0.1:1";
  auto src = OpenS3Source("s3://b/k", o);
  if (src.ok()) GTEST_SKIP() << "~/.aws/credentials holds a default profile";
  EXPECT_EQ(src.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(src.status().message(), HasSubstr("AWS_ACCESS_KEY_ID"));
  o.anonymous = true;
  EXPECT_TRUE(OpenS3Source("s3://b/k", o).ok());
}

}  // namespace
}  // namespace rangeio::detail
