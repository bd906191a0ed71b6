// What an answer to a range GET means, without a server: Content-Range and
// Content-Length checks, 200 instead of 206, the HTTP status -> StatusCode
// mapping, retry classification (5xx, 429, 503, libcurl errors), Retry-After,
// the size probe of an empty object, and a dialect's overrides.
#include "http/http_response.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "http/http_dialect.h"

namespace rangeio::detail {
namespace {

using ::testing::HasSubstr;

constexpr std::string_view kWhat = "GET http://host/o";
constexpr std::time_t kNow = 1'700'000'000;

Response Answer(long status, std::initializer_list<std::string_view> headers) {
  Response r;
  r.status = status;
  for (std::string_view h : headers) r.AddHeaderLine(h);
  return r;
}

// A dialect that reads every error body as the fields it was made with.
class FakeDialect final : public HttpDialect {
 public:
  explicit FakeDialect(ErrorDetail d) : detail_(std::move(d)) {}
  CURLcode Configure(CURL*) const override { return CURLE_OK; }
  ErrorDetail ReadErrorBody(std::string_view body) const override {
    seen_ = std::string(body);
    return detail_;
  }
  mutable std::string seen_;

 private:
  ErrorDetail detail_;
};

// The retry rule: full-jitter caps double from the base to the cap; the
// attempts, the deadline and a Retry-After decide whether to go on.
TEST(RetryRuleTest, BackoffCapsAndDecisions) {
  HttpOptions o;  // base 50 ms, cap 5 s, 5 attempts, deadline 60 s
  constexpr uint64_t kMs = 1'000'000;
  EXPECT_EQ(BackoffCapNanos(o, 1), 50 * kMs);
  EXPECT_EQ(BackoffCapNanos(o, 3), 200 * kMs);
  EXPECT_EQ(BackoffCapNanos(o, 20), 5000 * kMs);
  Attempt a;
  a.cause = RetryCause::k5xx;
  const uint64_t deadline = 60'000 * kMs;
  RetryDecision d = DecideRetry(o, a, 2, 0, deadline, 30 * kMs);
  EXPECT_TRUE(d.retry);
  EXPECT_EQ(d.wait_ns, 30 * kMs);
  a.retry_after_ns = 2000 * kMs;  // longer than the draw: honoured
  EXPECT_EQ(DecideRetry(o, a, 2, 0, deadline, 30 * kMs).wait_ns, 2000 * kMs);
  d = DecideRetry(o, a, 5, 0, deadline, 0);
  EXPECT_FALSE(d.retry);
  EXPECT_THAT(d.why, HasSubstr("gave up after 5 attempts"));
  d = DecideRetry(o, a, 2, deadline - kMs, deadline, 0);
  EXPECT_FALSE(d.retry);
  EXPECT_THAT(d.why, HasSubstr("no time for attempt 3"));
  d = DecideRetry(o, a, 2, deadline, deadline, 0);
  EXPECT_THAT(d.why, HasSubstr("passed during attempt 2"));
}

TEST(ContentRangeTest, ParsesSpansAndUnsatisfiedForms) {
  auto cr = ParseContentRange("bytes 10-19/100");
  ASSERT_TRUE(cr.has_value());
  EXPECT_FALSE(cr->unsatisfied);
  EXPECT_EQ(cr->first, 10u);
  EXPECT_EQ(cr->last, 19u);
  EXPECT_EQ(cr->total, 100u);

  cr = ParseContentRange("bytes 0-0/*");
  ASSERT_TRUE(cr.has_value());
  EXPECT_FALSE(cr->total.has_value());

  cr = ParseContentRange("bytes */42");
  ASSERT_TRUE(cr.has_value());
  EXPECT_TRUE(cr->unsatisfied);
  EXPECT_EQ(cr->total, 42u);
}

TEST(ContentRangeTest, RejectsMalformedValues) {
  for (const char* bad :
       {"", "bytes", "bytes 10-19", "items 10-19/100", "bytes 19-10/100",
        "bytes 10/100", "bytes -5/100", "bytes 1-2/x", "bytes 1-2/-3",
        "bytes 1-2 /100", "bytes a-b/100", "bytes 1-99999999999999999999/*"}) {
    EXPECT_FALSE(ParseContentRange(bad).has_value()) << bad;
  }
}

TEST(ResponseHeadersTest, ReadsTheHeadersItNeedsIgnoringCaseAndSpace) {
  Response r = Answer(206, {"HTTP/1.1 206 Partial Content\r\n",
                            "content-RANGE:  bytes 0-9/10 \r\n",
                            "Content-Length:\t10\r\n", "Retry-After: 3\r\n",
                            "X-Other: bytes 1-2/3\r\n", "no colon here\r\n"});
  EXPECT_EQ(r.content_range, "bytes 0-9/10");
  EXPECT_EQ(r.content_length, 10);
  EXPECT_EQ(r.retry_after, "3");
}

TEST(ResponseHeadersTest, AStatusLineForgetsTheAnswerBeforeARedirect) {
  Response r = Answer(206, {"HTTP/1.1 302 Found\r\n", "Content-Length: 5\r\n",
                            "Content-Range: bytes 0-4/5\r\n",
                            "Retry-After: 9\r\n", "HTTP/1.1 206 OK\r\n"});
  EXPECT_EQ(r.content_length, -1);
  EXPECT_EQ(r.content_range, "");
  EXPECT_EQ(r.retry_after, "");
}

TEST(ResponseHeadersTest, IgnoresAnUnparsableContentLength) {
  EXPECT_EQ(Answer(200, {"Content-Length: -1\r\n"}).content_length, -1);
  EXPECT_EQ(Answer(200, {"Content-Length: 12abc\r\n"}).content_length, -1);
  EXPECT_EQ(
      Answer(200, {"Content-Length: 9223372036854775808\r\n"}).content_length,
      -1);
  EXPECT_EQ(
      Answer(200, {"Content-Length: 9223372036854775807\r\n"}).content_length,
      INT64_MAX);
}

TEST(CheckDataHeadersTest, ExactPartialContentGivesTheTotal) {
  auto size = CheckDataHeaders(
      kWhat, {10, 10},
      Answer(206,
             {"Content-Range: bytes 10-19/100\r\n", "Content-Length: 10\r\n"}));
  ASSERT_TRUE(size.ok()) << size.status().ToString();
  EXPECT_EQ(*size, 100u);

  size = CheckDataHeaders(kWhat, {10, 10},
                          Answer(206, {"Content-Range: bytes 10-19/*\r\n"}));
  ASSERT_TRUE(size.ok());
  EXPECT_FALSE(size->has_value());
}

TEST(CheckDataHeadersTest, MissingOrWrongContentRangeIsAnError) {
  for (const char* cr : {"", "bytes 10-18/100", "bytes 11-19/100",
                         "bytes 0-99/100", "bytes */100", "garbage"}) {
    Response r = Answer(206, {});
    if (*cr) r.AddHeaderLine(std::string("Content-Range: ") + cr + "\r\n");
    auto size = CheckDataHeaders(kWhat, {10, 10}, r);
    ASSERT_FALSE(size.ok()) << cr;
    EXPECT_EQ(size.status().code(), StatusCode::kIoError);
    EXPECT_THAT(size.status().message(),
                HasSubstr("GET http://host/o: asked for bytes=10-19, got 206 "
                          "with Content-Range '" +
                          std::string(cr) + "'"));
  }
}

TEST(CheckDataHeadersTest, ContentLengthMustMatchTheRange) {
  auto size = CheckDataHeaders(
      kWhat, {10, 10},
      Answer(206,
             {"Content-Range: bytes 10-19/100\r\n", "Content-Length: 11\r\n"}));
  ASSERT_FALSE(size.ok());
  EXPECT_THAT(size.status().message(), HasSubstr("Content-Length 11"));
}

TEST(CheckDataHeadersTest, OkInsteadOfPartialOnlyForTheWholeObject) {
  auto whole =
      CheckDataHeaders(kWhat, {0, 10}, Answer(200, {"Content-Length: 10\r\n"}));
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(*whole, 10u);

  auto bigger =
      CheckDataHeaders(kWhat, {0, 10}, Answer(200, {"Content-Length: 99\r\n"}));
  ASSERT_FALSE(bigger.ok());
  EXPECT_EQ(bigger.status().code(), StatusCode::kIoError);
  EXPECT_THAT(bigger.status().message(),
              HasSubstr("ignored the Range header (bytes=0-9) and answered "
                        "200 OK with 99 bytes"));

  auto offset =
      CheckDataHeaders(kWhat, {5, 10}, Answer(200, {"Content-Length: 10\r\n"}));
  EXPECT_FALSE(offset.ok());

  auto unknown = CheckDataHeaders(kWhat, {0, 10}, Answer(200, {}));
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("with an unknown number of bytes"));
}

TEST(HttpStatusTest, MapsEachStatusToOneCodeAndRetryCause) {
  EXPECT_EQ(StatusCodeOfHttp(404), StatusCode::kNotFound);
  EXPECT_EQ(StatusCodeOfHttp(401), StatusCode::kPermissionDenied);
  EXPECT_EQ(StatusCodeOfHttp(403), StatusCode::kPermissionDenied);
  EXPECT_EQ(StatusCodeOfHttp(416), StatusCode::kOutOfRange);
  for (long s : {301L, 302L, 400L, 405L, 409L, 412L, 429L, 500L, 503L}) {
    EXPECT_EQ(StatusCodeOfHttp(s), StatusCode::kIoError) << s;
  }
  EXPECT_EQ(RetryCauseOfHttp(429), RetryCause::kThrottled);
  EXPECT_EQ(RetryCauseOfHttp(503), RetryCause::kThrottled);
  for (long s : {500L, 501L, 502L, 504L, 599L}) {
    EXPECT_EQ(RetryCauseOfHttp(s), RetryCause::k5xx) << s;
  }
  for (long s : {200L, 301L, 307L, 400L, 403L, 404L, 416L, 499L, 600L}) {
    EXPECT_EQ(RetryCauseOfHttp(s), RetryCause::kNone) << s;
  }
}

TEST(ErrorAnswerTest, NamesTheRequestStatusAndReason) {
  Attempt a = ErrorAnswer(kWhat, Answer(404, {}), {}, kNow);
  EXPECT_EQ(a.status.code(), StatusCode::kNotFound);
  EXPECT_EQ(a.status.message(), "GET http://host/o: HTTP 404 Not Found");
  EXPECT_EQ(a.cause, RetryCause::kNone);

  a = ErrorAnswer(kWhat, Answer(418, {}), {}, kNow);
  EXPECT_EQ(a.status.message(), "GET http://host/o: HTTP 418");
  EXPECT_EQ(a.status.code(), StatusCode::kIoError);
}

TEST(ErrorAnswerTest, ARedirectNotFollowedIsAFinalError) {
  Attempt a = ErrorAnswer(
      kWhat, Answer(301, {"Location: http://elsewhere/o\r\n"}), {}, kNow);
  EXPECT_EQ(a.status.code(), StatusCode::kIoError);
  EXPECT_THAT(a.status.message(), HasSubstr("HTTP 301 Moved Permanently"));
  EXPECT_EQ(a.cause, RetryCause::kNone);
}

TEST(ErrorAnswerTest, RangeNotSatisfiableTellsTheSize) {
  Attempt a = ErrorAnswer(kWhat, Answer(416, {"Content-Range: bytes */7\r\n"}),
                          {}, kNow);
  EXPECT_EQ(a.status.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(a.status.message(),
            "GET http://host/o: HTTP 416 Range Not Satisfiable (the object "
            "has 7 bytes)");
  EXPECT_EQ(a.cause, RetryCause::kNone);

  ErrorDetail from_body;
  from_body.object_size = 5;
  a = ErrorAnswer(kWhat, Answer(416, {}), from_body, kNow);
  EXPECT_THAT(a.status.message(), HasSubstr("(the object has 5 bytes)"));
  a = ErrorAnswer(kWhat, Answer(416, {}), {}, kNow);
  EXPECT_THAT(a.status.message(), ::testing::Not(HasSubstr("the object has")));
}

TEST(ErrorAnswerTest, RetryAfterCountsOnlyForRetryableAnswers) {
  Attempt a = ErrorAnswer(kWhat, Answer(503, {"Retry-After: 2\r\n"}), {}, kNow);
  EXPECT_EQ(a.cause, RetryCause::kThrottled);
  EXPECT_EQ(a.retry_after_ns, 2'000'000'000u);

  a = ErrorAnswer(kWhat, Answer(429, {"Retry-After: 1\r\n"}), {}, kNow);
  EXPECT_EQ(a.cause, RetryCause::kThrottled);
  EXPECT_EQ(a.retry_after_ns, 1'000'000'000u);

  a = ErrorAnswer(kWhat, Answer(500, {}), {}, kNow);
  EXPECT_EQ(a.cause, RetryCause::k5xx);
  EXPECT_EQ(a.retry_after_ns, 0u);

  a = ErrorAnswer(kWhat, Answer(403, {"Retry-After: 2\r\n"}), {}, kNow);
  EXPECT_EQ(a.cause, RetryCause::kNone);
  EXPECT_EQ(a.retry_after_ns, 0u);
}

TEST(RetryAfterTest, SecondsOrADateCappedAtADay) {
  EXPECT_EQ(RetryAfterNanos("0", kNow), 0u);
  EXPECT_EQ(RetryAfterNanos("5", kNow), 5'000'000'000u);
  EXPECT_EQ(RetryAfterNanos("999999999", kNow), 86'400'000'000'000u);
  EXPECT_EQ(RetryAfterNanos("", kNow), 0u);
  EXPECT_EQ(RetryAfterNanos("soon", kNow), 0u);
  EXPECT_EQ(RetryAfterNanos("-3", kNow), 0u);
  // kNow is Tue, 14 Nov 2023 22:13:20 GMT.
  EXPECT_EQ(RetryAfterNanos("Tue, 14 Nov 2023 22:13:30 GMT", kNow),
            10'000'000'000u);
  EXPECT_EQ(RetryAfterNanos("Tue, 14 Nov 2023 22:00:00 GMT", kNow), 0u);
  EXPECT_EQ(RetryAfterNanos("Fri, 01 Dec 2023 00:00:00 GMT", kNow),
            86'400'000'000'000u);
}

TEST(TransportErrorTest, ConnectionFailuresAndTimeoutsAreRetried) {
  for (CURLcode rc : {CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_CONNECT,
                      CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_GOT_NOTHING,
                      CURLE_PARTIAL_FILE, CURLE_HTTP2, CURLE_HTTP2_STREAM}) {
    EXPECT_EQ(RetryCauseOf(rc), RetryCause::kConnection) << rc;
  }
  EXPECT_EQ(RetryCauseOf(CURLE_OPERATION_TIMEDOUT), RetryCause::kTimeout);
  for (CURLcode rc :
       {CURLE_OK, CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION,
        CURLE_WRITE_ERROR, CURLE_URL_MALFORMAT, CURLE_TOO_MANY_REDIRECTS}) {
    EXPECT_EQ(RetryCauseOf(rc), RetryCause::kNone) << rc;
  }
}

TEST(TransportErrorTest, PrefersLibcurlsErrorBufferText) {
  Attempt a = TransportError(kWhat, CURLE_COULDNT_CONNECT, "refused by peer");
  EXPECT_EQ(a.status.code(), StatusCode::kIoError);
  EXPECT_EQ(a.status.message(),
            "GET http://host/o: refused by peer (curl error 7)");
  EXPECT_EQ(a.cause, RetryCause::kConnection);

  a = TransportError(kWhat, CURLE_OPERATION_TIMEDOUT, "");
  EXPECT_EQ(a.status.message(),
            std::string("GET http://host/o: ") +
                curl_easy_strerror(CURLE_OPERATION_TIMEDOUT) +
                " (curl error 28)");
  EXPECT_EQ(a.cause, RetryCause::kTimeout);
}

TEST(RetryCauseNameTest, NamesEachCause) {
  EXPECT_STREQ(RetryCauseName(RetryCause::k5xx), "server error");
  EXPECT_STREQ(RetryCauseName(RetryCause::kThrottled), "throttled");
  EXPECT_STREQ(RetryCauseName(RetryCause::kConnection), "connection");
  EXPECT_STREQ(RetryCauseName(RetryCause::kTimeout), "timeout");
  EXPECT_STREQ(RetryCauseName(RetryCause::kNone), "none");
}

TEST(JudgeAnswerTest, ACompleteBodyIsTheRead) {
  Response r = Answer(206, {"Content-Range: bytes 0-9/10\r\n"});
  r.body_started = true;
  r.received = 10;
  Attempt a = JudgeAnswer(kWhat, {0, 10}, false, r, nullptr, kNow);
  EXPECT_TRUE(a.status.ok()) << a.status.ToString();
  EXPECT_FALSE(a.object_size.has_value());  // noted when the body started
}

TEST(JudgeAnswerTest, AShortBodyIsRetriedNeverHandedOut) {
  Response r = Answer(206, {"Content-Range: bytes 0-9/10\r\n"});
  r.body_started = true;
  r.received = 4;
  Attempt a = JudgeAnswer(kWhat, {0, 10}, false, r, nullptr, kNow);
  EXPECT_EQ(a.status.code(), StatusCode::kIoError);
  EXPECT_THAT(a.status.message(), HasSubstr("the body ended after 4 of 10"));
  EXPECT_EQ(a.cause, RetryCause::kConnection);
}

TEST(JudgeAnswerTest, NoBodyAtAllHasItsHeadersCheckedHere) {
  Response ok = Answer(206, {"Content-Range: bytes 0-9/10\r\n"});
  Attempt a = JudgeAnswer(kWhat, {0, 10}, false, ok, nullptr, kNow);
  EXPECT_EQ(a.object_size, 10u);
  EXPECT_EQ(a.cause, RetryCause::kConnection);  // and no bytes

  Response wrong = Answer(206, {"Content-Range: bytes 1-10/10\r\n"});
  a = JudgeAnswer(kWhat, {0, 10}, false, wrong, nullptr, kNow);
  EXPECT_EQ(a.status.code(), StatusCode::kIoError);
  EXPECT_THAT(a.status.message(), HasSubstr("Content-Range 'bytes 1-10/10'"));
  EXPECT_EQ(a.cause, RetryCause::kNone);
}

TEST(JudgeAnswerTest, SizeProbeOfAnEmptyObjectSucceeds) {
  // Ceph RGW's 416 says no size at all: no byte 0 means an empty object.
  for (const Response& r :
       {Answer(416, {"Content-Range: bytes */0\r\n"}),
        Answer(200, {"Content-Length: 0\r\n"}), Answer(416, {})}) {
    Attempt a = JudgeAnswer(kWhat, {0, 1}, true, r, nullptr, kNow);
    EXPECT_TRUE(a.status.ok()) << r.status << ": " << a.status.ToString();
    EXPECT_EQ(a.object_size, 0u);
  }
  // The same answers to a read are errors.
  Attempt a =
      JudgeAnswer(kWhat, {0, 1}, false,
                  Answer(416, {"Content-Range: bytes */0\r\n"}), nullptr, kNow);
  EXPECT_EQ(a.status.code(), StatusCode::kOutOfRange);
  a = JudgeAnswer(kWhat, {0, 1}, false, Answer(200, {"Content-Length: 0\r\n"}),
                  nullptr, kNow);
  EXPECT_EQ(a.status.code(), StatusCode::kIoError);
  // A probe of a non-empty object that answers 416 is an error too.
  a = JudgeAnswer(kWhat, {0, 1}, true,
                  Answer(416, {"Content-Range: bytes */3\r\n"}), nullptr, kNow);
  EXPECT_EQ(a.status.code(), StatusCode::kOutOfRange);
}

TEST(JudgeAnswerTest, ADialectReadsTheErrorBodyAndOverridesTheStatus) {
  ErrorDetail d;
  d.text = ", S3 error NoSuchKey: gone";
  d.code = StatusCode::kNotFound;
  d.cause = RetryCause::kThrottled;
  FakeDialect dialect(d);
  Response r = Answer(403, {"Retry-After: 4\r\n"});
  r.error_body = "<Error/>";
  Attempt a = JudgeAnswer(kWhat, {0, 10}, false, r, &dialect, kNow);
  EXPECT_EQ(dialect.seen_, "<Error/>");
  EXPECT_EQ(a.status.code(), StatusCode::kNotFound);
  EXPECT_EQ(a.status.message(),
            "GET http://host/o: HTTP 403 Forbidden, S3 error NoSuchKey: gone");
  EXPECT_EQ(a.cause, RetryCause::kThrottled);
  EXPECT_EQ(a.retry_after_ns, 4'000'000'000u);

  // A size probe learns an empty object's size from the dialect.
  ErrorDetail empty;
  empty.object_size = 0;
  FakeDialect sized(empty);
  a = JudgeAnswer(kWhat, {0, 1}, true, Answer(416, {}), &sized, kNow);
  EXPECT_TRUE(a.status.ok());
  EXPECT_EQ(a.object_size, 0u);
}

TEST(JudgeAnswerTest, NoDialectLeavesTheStatusMapping) {
  Response r = Answer(503, {});
  r.error_body = "<Error><Code>NoSuchKey</Code></Error>";
  Attempt a = JudgeAnswer(kWhat, {0, 10}, false, r, nullptr, kNow);
  EXPECT_EQ(a.status.code(), StatusCode::kIoError);
  EXPECT_EQ(a.status.message(),
            "GET http://host/o: HTTP 503 Service Unavailable");
  EXPECT_EQ(a.cause, RetryCause::kThrottled);
}

TEST(RangeHeaderTest, IsInclusive) {
  EXPECT_EQ(RangeHeaderValue({0, 1}), "bytes=0-0");
  EXPECT_EQ(RangeHeaderValue({10, 10}), "bytes=10-19");
}

}  // namespace
}  // namespace rangeio::detail
