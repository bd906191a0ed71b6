// The one redaction function every error path uses (src/util/redact.h): no
// userinfo, no signing query value, foreign text escaped and bounded.
#include "util/redact.h"

#include <gtest/gtest.h>

#include <string>

namespace rangeio::detail {
namespace {

TEST(RedactTest, UserinfoIsDroppedWhateverTheScheme) {
  EXPECT_EQ(RedactUrl("ftp://alice:s3cret@host/file"), "ftp://host/file");
  EXPECT_EQ(RedactUrl("https://alice:s3cret@h:8443/a?b=c"),
            "https://h:8443/a?b=c");
  EXPECT_EQ(RedactUrl("http://alice@host/"), "http://host/");
  // A password with an unencoded '@': everything up to the last one goes.
  EXPECT_EQ(RedactUrl("http://u:p@ss@host/x"), "http://host/x");
  EXPECT_EQ(RedactUrl("http://host/a@b"), "http://host/a@b");
  EXPECT_EQ(RedactUrl("gopher://u:pw@host"), "gopher://host");
  // A URL inside a URL (found by url_fuzz): its userinfo goes too.
  EXPECT_EQ(RedactUrl("http://proxy/get?u=ftp://bob:hunter2@h/f"),
            "http://proxy/get?u=ftp://h/f");
  EXPECT_EQ(RedactUrl("ftp://a:b@h/pathftp://bob:hunter2@h2/f"),
            "ftp://h/pathftp://h2/f");
  // Dropping one userinfo may join the text around it into another (found
  // by url_fuzz): that one goes too.
  EXPECT_EQ(RedactUrl("s3:/x@/k@"), "s3://");
  EXPECT_EQ(RedactUrl("http://a@/b@/c@"), "http:////c@");  // a path now
}

TEST(RedactTest, SigningQueryValuesAreHidden) {
  const std::string url =
      "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256"
      "&X-Amz-Credential=AKIDEXAMPLE%2F20261201%2Fus-east-1&X-Amz-Date=1"
      "&x-amz-security-token=TOKEN123&X-Amz-Signature=deadbeef#frag";
  const std::string got = RedactUrl(url);
  EXPECT_EQ(got,
            "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256"
            "&X-Amz-Credential=REDACTED&X-Amz-Date=1"
            "&x-amz-security-token=REDACTED&X-Amz-Signature=REDACTED#frag");
  EXPECT_EQ(got.find("deadbeef"), std::string::npos);
  EXPECT_EQ(got.find("TOKEN123"), std::string::npos);
  EXPECT_EQ(got.find("AKIDEXAMPLE"), std::string::npos);
}

TEST(RedactTest, ForeignTextIsEscapedAndBounded) {
  EXPECT_EQ(ForeignText("bytes 0-1/2"), "bytes 0-1/2");
  EXPECT_EQ(ForeignText("a\r\nInjected: 1\x1b[31m\\"),
            "a\\x0d\\x0aInjected: 1\\x1b[31m\\x5c");
  EXPECT_EQ(ForeignText(std::string("\xff\0", 2), 10), "\\xff\\x00");
  const std::string huge(90'000, 'x');
  const std::string shown = ForeignText(huge);
  EXPECT_EQ(shown, std::string(kMaxForeignText, 'x') + "... (90000 bytes)");
  // A URL is escaped too: no raw newline from a config file.
  EXPECT_EQ(RedactUrl("http://h/a\nb"), "http://h/a\\x0ab");
}

TEST(RedactTest, ControlCharactersAreFound) {
  EXPECT_FALSE(HasControlChars("AKIDEXAMPLE/+=abc"));
  EXPECT_TRUE(HasControlChars("tok\r\nX-Evil: 1"));
  EXPECT_TRUE(HasControlChars(std::string("a\0b", 3)));
  EXPECT_TRUE(HasControlChars("a\x7f"));
  EXPECT_TRUE(HasControlChars("tab\there"));
}

}  // namespace
}  // namespace rangeio::detail
