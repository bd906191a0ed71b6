// http_response.h (internal) — the pure half of the HTTP transport: what an
// answer to a range GET means.
//
// Header parsing, the Content-Range and Content-Length checks that decide
// whether a body is exactly the requested bytes, the mapping of an HTTP
// status to a StatusCode, and which failures are worth another attempt. No
// I/O and no state: the event loop (curl_engine.cc) fills a Response from
// libcurl's callbacks and asks these functions what it amounts to, and the
// tests ask them directly (tests/http_response_test.cc).
//
// HTTP statuses are mapped to StatusCode and RetryCause here and nowhere
// else; a dialect (http_dialect.h) may override both from the error body.
//
// Thread-safety: stateless functions; a Response belongs to one transfer.
#pragma once

#include <curl/curl.h>

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include "rangeio/byte_range.h"
#include "rangeio/http.h"
#include "rangeio/status.h"

namespace rangeio::detail {

class HttpDialect;

// The most of an error answer's body kept for its message. S3 error
// documents are well under 1 KiB; 16 KiB keeps any sane error body whole
// without letting a huge non-206 answer grow memory.
inline constexpr size_t kMaxErrorBody = 16 << 10;

// What makes a failed attempt worth another one.
enum class RetryCause { kNone, k5xx, kThrottled, kConnection, kTimeout };

// "server error", "throttled", "connection", "timeout" ("none").
const char* RetryCauseName(RetryCause cause);

// Counts one retry in the counter of its cause (HttpStats::retries_*).
void CountRetry(RetryCause cause, HttpStats* s);

// The longest wait before the attempt after `attempt` (1, 2, ...): "full
// jitter" draws the wait uniformly in [0, this], which is
// min(retry_max_backoff, retry_base_backoff x 2^(attempt - 1)), in ns.
uint64_t BackoffCapNanos(const HttpOptions& o, uint32_t attempt);

// The retry cause of a libcurl result: connection failures and timeouts;
// kNone for the rest (including CURLE_OK).
RetryCause RetryCauseOf(CURLcode rc);

// The retry cause of an HTTP status: 429 and 503 are throttles, other 5xx
// server errors, everything else final.
RetryCause RetryCauseOfHttp(long http_status);

// The StatusCode of an HTTP error status: 404 NotFound, 401 and 403
// PermissionDenied, 416 OutOfRange, anything else IoError.
StatusCode StatusCodeOfHttp(long http_status);

// "bytes FIRST-LAST/TOTAL" or "bytes */TOTAL"; TOTAL may be "*".
struct ContentRange {
  bool unsatisfied = false;  // "bytes */TOTAL"
  uint64_t first = 0;
  uint64_t last = 0;
  std::optional<uint64_t> total;
};
// nullopt when `value` is not one of those forms (or LAST < FIRST).
std::optional<ContentRange> ParseContentRange(std::string_view value);

// "bytes=FIRST-LAST" of a non-empty range: the Range header that asks for it.
std::string RangeHeaderValue(ByteRange range);

// The wait a Retry-After header asks for: delta-seconds or an HTTP date
// (relative to `now`), capped at a day; 0 when absent, past or malformed.
uint64_t RetryAfterNanos(const std::string& value, std::time_t now);

// One answer to one attempt, as libcurl's callbacks fill it.
struct Response {
  long status = 0;  // the HTTP status (0 until known)
  int64_t content_length = -1;
  std::string content_range;
  std::string retry_after;
  std::string etag;  // the version validators (see VersionPin)
  std::string last_modified;
  bool body_started = false;  // the body callback has run
  uint64_t received = 0;      // body bytes taken as the range's data
  std::string error_body;     // body of a non-2xx answer, kMaxErrorBody at most

  // Takes one header line as libcurl hands it over (CRLF included). A
  // status line ("HTTP/...") starts a new answer (after a redirect) and
  // forgets the headers of the previous one.
  void AddHeaderLine(std::string_view line);
};

// What an error body says beyond the HTTP status (see HttpDialect).
struct ErrorDetail {
  std::string text;                     // appended to the message
  std::optional<StatusCode> code;       // overrides StatusCodeOfHttp
  std::optional<RetryCause> cause;      // overrides RetryCauseOfHttp
  std::optional<uint64_t> object_size;  // the size a 416 body states
};

// The outcome of one attempt.
struct Attempt {
  Status status;  // OK: the read's bytes are in the buffer
  RetryCause cause = RetryCause::kNone;
  uint64_t retry_after_ns = 0;  // from a Retry-After header
  // The object's total size as the answer states it: the transport records
  // it (and fails the read if it contradicts the size already known).
  std::optional<uint64_t> object_size;
};

// After a failed attempt that may be retried (a.cause != kNone): retry
// after `wait_ns`, or give up, `why` saying so. `attempts` were made so far;
// `jitter_ns` is the full-jitter draw in [0, BackoffCapNanos]; a
// Retry-After longer than it is honoured.
struct RetryDecision {
  bool retry = false;
  uint64_t wait_ns = 0;
  std::string why;
};
RetryDecision DecideRetry(const HttpOptions& o, const Attempt& a,
                          uint32_t attempts, uint64_t now_ns,
                          uint64_t deadline_ns, uint64_t jitter_ns);

// Checks the headers of a 200 or 206 (`r.status`) before its body is taken
// as `range`. On success, the object's size when the answer states it.
// `what` names the request in errors ("GET <url>").
Result<std::optional<uint64_t>> CheckDataHeaders(std::string_view what,
                                                 ByteRange range,
                                                 const Response& r);

// The attempt that libcurl ended with `rc` (not CURLE_OK); `errbuf` is its
// CURLOPT_ERRORBUFFER text, preferred when not empty.
Attempt TransportError(std::string_view what, CURLcode rc, const char* errbuf);

// The error of a non-2xx answer: its message, StatusCode and retry cause.
Attempt ErrorAnswer(std::string_view what, const Response& r,
                    const ErrorDetail& detail, std::time_t now);

// What a complete answer (libcurl finished with CURLE_OK) amounts to.
// `size_probe`: the bytes=0-0 GET of Source::Size(), for which the answer
// for an empty object is a success. `dialect` may be null (plain HTTP).
Attempt JudgeAnswer(std::string_view what, ByteRange range, bool size_probe,
                    const Response& r, const HttpDialect* dialect,
                    std::time_t now);

}  // namespace rangeio::detail
