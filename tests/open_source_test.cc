// OpenSource: plain paths and file:// URLs become local files; every other
// name is rejected before any I/O with a message naming it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "rangeio/rangeio.h"

namespace rangeio {
namespace {

using ::testing::HasSubstr;

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
  EXPECT_THAT((*source)->Describe(), HasSubstr("pread pool, up to 3 threads"));
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
      {"s3://bucket/key", "unsupported scheme 's3' in 's3://bucket/key'"},
      {"https://example.com/a", "unsupported scheme 'https'"},
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
    if (!c.name.empty()) {
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

}  // namespace
}  // namespace rangeio
