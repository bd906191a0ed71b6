// OpenSource: plain paths and file:// URLs become local files, http(s)://
// and s3:// URLs object-store sources (opened without I/O); every other name
// is rejected before any I/O with a message naming it. SourceOptions::Set
// applies every key of docs/options.md.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "rangeio/rangeio.h"

namespace rangeio {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class OpenSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "rangeio_url_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr) << tmpl;
    dir_ = tmpl;
    path_ = dir_ + "/a b%#?.bin";
    FILE* f = std::fopen(path_.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("0123456789", f);
    std::fclose(f);
  }
  void TearDown() override {
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }

  // The file URL of path_, escaped.
  std::string Url(const std::string& prefix) const {
    return prefix + dir_ + "/a%20b%25%23%3F.bin";
  }

  std::string dir_;
  std::string path_;
};

TEST_F(OpenSourceTest, PlainPathsAndFileUrlsOpenTheSameFile) {
  for (const std::string& name :
       {path_, Url("file://"), Url("file://localhost"), Url("FILE://LocalHost"),
        Url("file:")}) {
    SCOPED_TRACE(name);
    auto source = OpenSource(name);
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    EXPECT_EQ((*source)->name(), path_);
    EXPECT_EQ(*(*source)->Size(), 10u);
  }
}

TEST_F(OpenSourceTest, OptionsReachTheLocalBackend) {
  SourceOptions o;
  o.local.engine = LocalEngine::kPread;
  o.local.threads = 3;
  auto source = OpenSource(Url("file://"), o);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_THAT((*source)->Info().description,
              HasSubstr("pread pool, up to 3 threads"));
  o.local.threads = 0;
  auto bad = OpenSource(Url("file://"), o);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(OpenSourceTest, NameWithAColonButNoSlashesIsAPath) {
  auto source = OpenSource("no-such-dir:a.bin");
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(source.status().message(), HasSubstr("'no-such-dir:a.bin'"));
}

TEST_F(OpenSourceTest, BadNamesAreInvalidArgumentsNamingThem) {
  struct Case {
    std::string name;
    std::string says;
  };
  const Case cases[] = {
      {"", "empty"},
      {"gs://bucket/key",
       "unsupported scheme 'gs' in 'gs://bucket/key': supported are s3://, "
       "http://, https://, file:// and plain paths"},
      {"s3://bucket", "names no key"},
      {"s3://bucket/", "names no key"},
      {"s3://bad_bucket!/k", "bucket 'bad_bucket!' is invalid"},
      {"http://[::1/a", "malformed http(s) URL"},
      {"file://otherhost/tmp/a", "names host 'otherhost'"},
      {"file://", "has no path"},
      {"file://localhost", "has no path"},
      {"file:///tmp/a%2", "bad escape at '%2'"},
      {"file:///tmp/a%zz", "bad escape at '%zz'"},
      {"file:///tmp/a%00b", "NUL"},
      {"file:///tmp/a?x=1", "query or fragment"},
      {"file:///tmp/a#frag", "query or fragment"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto source = OpenSource(c.name);
    ASSERT_FALSE(source.ok());
    EXPECT_EQ(source.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(source.status().message(), HasSubstr(c.says));
    if (!c.name.empty() && !c.name.starts_with("http:")) {
      EXPECT_THAT(source.status().message(), HasSubstr(c.name));
    }
  }
}

TEST_F(OpenSourceTest, MissingFileUrlIsNotFoundNamingTheDecodedPath) {
  auto source = OpenSource("file://" + dir_ + "/no%20such.bin");
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(source.status().message(), HasSubstr(dir_ + "/no such.bin"));
}

TEST(OpenSourceDispatchTest, ObjectStoreUrlsOpenWithoutIo) {
  SourceOptions o;
  o.s3.access_key_id = "AKIDEXAMPLE";
  o.s3.secret_access_key = "secret-never-shown";
  o.s3.endpoint = "http://127.0.0.1:1";  // nothing listens: no I/O is made
  o.s3.region = "eu-west-1";
  const struct {
    std::string url;
    std::string name;
    std::string describe;
  } cases[] = {
      {"s3://bucket/dir/a b+c.bin", "s3://bucket/dir/a b+c.bin",
       "SigV4-signed S3 ranged GETs (region eu-west-1, path style at "
       "http://127.0.0.1:1)"},
      {"S3://bucket/k", "s3://bucket/k", "SigV4-signed"},
      {"http://127.0.0.1:1/a%20b.bin", "http://127.0.0.1:1/a%20b.bin",
       "ranged GETs over HTTP"},
      {"HTTPS://user:pw@127.0.0.1:1/x", "https://127.0.0.1:1/x",
       "ranged GETs over HTTP"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.url);
    auto source = OpenSource(c.url, o);
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    EXPECT_EQ((*source)->name(), c.name);
    EXPECT_THAT((*source)->Info().description, HasSubstr(c.describe));
    EXPECT_THAT((*source)->Info().description,
                Not(HasSubstr("secret-never-shown")));
    auto http = GetHttpStats(**source);
    ASSERT_TRUE(http.ok());
    EXPECT_EQ(http->gets, 0u);
    EXPECT_EQ(http->heads, 0u);
  }
}

TEST(OpenSourceDispatchTest, HttpOptionsReachBothObjectStores) {
  SourceOptions o;
  o.s3.anonymous = true;
  o.http.max_connections = 0;  // invalid: proves which options were used
  for (const char* url : {"s3://bucket/k", "http://127.0.0.1:1/k"}) {
    SCOPED_TRACE(url);
    auto source = OpenSource(url, o);
    ASSERT_FALSE(source.ok());
    EXPECT_THAT(source.status().message(), HasSubstr("max_connections=0"));
  }
  o.http.max_connections = 8;
  o.http.size_hint = 123;
  for (const char* url : {"s3://bucket/k", "http://127.0.0.1:1/k"}) {
    auto source = OpenSource(url, o);
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    EXPECT_EQ(*(*source)->Size(), 123u);  // the hint: no request
    EXPECT_EQ(GetHttpStats(**source)->gets, 0u);
    EXPECT_THAT((*source)->Info().description,
                HasSubstr("up to 8 connections"));
  }
}

TEST(OpenSourceDispatchTest, MissingProfileFailsAtOpenNamingTheUrl) {
  SourceOptions o;
  o.s3.profile = "rangeio-no-such-profile";  // skips the environment
  o.s3.endpoint = "http://127.0.0.1:1";
  auto source = OpenSource("s3://bucket/k", o);
  ASSERT_FALSE(source.ok());
  EXPECT_THAT(source.status().message(), HasSubstr("s3://bucket/k"));
  EXPECT_THAT(source.status().message(), HasSubstr("credentials"));
}

TEST(SourceOptionsTest, EveryKeySetsItsField) {
  SourceOptions o;
  const std::pair<const char*, const char*> kvs[] = {
      {"connect-timeout-ms", "1500"},
      {"first-byte-timeout-ms", "2500"},
      {"stall-timeout-ms", "3500"},
      {"min-bytes-per-second", "0"},
      {"retry-base-backoff-ms", "10"},
      {"retry-max-backoff-ms", "900"},
      {"deadline-ms", "45000"},
      {"max-attempts", "3"},
      {"max-connections", "16"},
      {"verify-tls", "false"},
      {"ca-file", "/etc/ca.pem"},
      {"adaptive", "off"},
      {"size-hint", "2MiB"},
      {"endpoint", "http://127.0.0.1:9000"},
      {"region", "eu-west-1"},
      {"profile", "work"},
      {"anonymous", "true"},
      {"access-key-id", "AKID"},
      {"secret-access-key", "SECRET"},
      {"session-token", "TOKEN"},
      {"addressing", "virtual-hosted"},
      {"local-engine", "uring"},
      {"direct", "true"},
      {"try-inline", "false"},
      {"local-threads", "7"},
      {"hit-threads", "0"},
  };
  for (const auto& [k, v] : kvs) {
    EXPECT_TRUE(SourceOptions::IsKey(k)) << k;
    const Status st = o.Set(k, v);
    EXPECT_TRUE(st.ok()) << k << ": " << st.ToString();
  }
  EXPECT_EQ(o.http.connect_timeout.count(), 1500);
  EXPECT_EQ(o.http.first_byte_timeout.count(), 2500);
  EXPECT_EQ(o.http.stall_timeout.count(), 3500);
  EXPECT_EQ(o.http.min_bytes_per_second, 0u);
  EXPECT_EQ(o.http.retry_base_backoff.count(), 10);
  EXPECT_EQ(o.http.retry_max_backoff.count(), 900);
  EXPECT_EQ(o.http.deadline.count(), 45000);
  EXPECT_EQ(o.http.max_attempts, 3u);
  EXPECT_EQ(o.http.max_connections, 16u);
  EXPECT_FALSE(o.http.verify_tls);
  EXPECT_EQ(o.http.ca_file, "/etc/ca.pem");
  EXPECT_FALSE(o.http.adaptive);
  EXPECT_EQ(o.http.size_hint, std::optional<uint64_t>(2u << 20));
  EXPECT_EQ(o.s3.endpoint, "http://127.0.0.1:9000");
  EXPECT_EQ(o.s3.region, "eu-west-1");
  EXPECT_EQ(o.s3.profile, "work");
  EXPECT_TRUE(o.s3.anonymous);
  EXPECT_EQ(o.s3.access_key_id, "AKID");
  EXPECT_EQ(o.s3.secret_access_key, "SECRET");
  EXPECT_EQ(o.s3.session_token, "TOKEN");
  EXPECT_EQ(o.s3.addressing, S3Addressing::kVirtualHosted);
  EXPECT_EQ(o.local.engine, LocalEngine::kUring);
  EXPECT_TRUE(o.local.direct);
  EXPECT_FALSE(o.local.try_inline);
  EXPECT_EQ(o.local.threads, std::optional<uint32_t>(7));
  EXPECT_EQ(o.local.hit_threads, std::optional<uint32_t>(0));
}

TEST(SourceOptionsTest, BadValuesNameTheKeyButNeverACredential) {
  const std::pair<const char*, const char*> bad[] = {
      {"connect-timeout-ms", "0"}, {"connect-timeout-ms", "1s"},
      {"deadline-ms", "86400001"}, {"min-bytes-per-second", "2TiB"},
      {"max-attempts", "101"},     {"max-connections", "-1"},
      {"verify-tls", "yes"},       {"size-hint", "12XB"},
      {"addressing", "vhost"},     {"local-engine", "aio"},
      {"local-threads", "0"},      {"hit-threads", "4097"},
      {"region", "eu\nwest"},      {"anonymous", "1"},
      {"adaptive", "true"},
  };
  for (const auto& [k, v] : bad) {
    SourceOptions o;
    const Status st = o.Set(k, v);
    ASSERT_FALSE(st.ok()) << k << "=" << v;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(st.message(), HasSubstr(std::string("option ") + k));
    EXPECT_EQ(st.message().find('\n'), std::string::npos) << "raw newline";
  }
  for (const char* k :
       {"access-key-id", "secret-access-key", "session-token"}) {
    SourceOptions o;
    const Status st = o.Set(k, "hunter2\r\nX-Evil: 1");
    ASSERT_FALSE(st.ok()) << k;
    EXPECT_THAT(st.message(), HasSubstr(std::string("option ") + k));
    EXPECT_THAT(st.message(), Not(HasSubstr("hunter2")));
  }
  SourceOptions o;
  const Status unknown = o.Set("read-thread-num", "4");
  EXPECT_FALSE(SourceOptions::IsKey("read-thread-num"));
  EXPECT_THAT(unknown.message(), HasSubstr("unknown source option "
                                           "'read-thread-num'"));
}

}  // namespace
}  // namespace rangeio
