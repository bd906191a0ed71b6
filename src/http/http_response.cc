// http_response.cc — what an answer to a range GET means: header parsing,
// exact-range checks, HTTP status mapping and retry classification.
// Stateless; see http_response.h.
#include "http/http_response.h"

#include <algorithm>

#include "http/http_dialect.h"
#include "util/parse_text.h"
#include "util/redact.h"

namespace rangeio::detail {
namespace {

constexpr uint64_t kNanosPerSecond = 1'000'000'000;
// Longest wait a Retry-After may ask for: a day, as HttpOptions' bounds.
constexpr uint64_t kMaxRetryAfterSeconds = 86'400;

const char* ReasonPhrase(long status) {
  switch (status) {
    case 200:
      return "OK";
    case 206:
      return "Partial Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 307:
      return "Temporary Redirect";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 409:
      return "Conflict";
    case 412:
      return "Precondition Failed";
    case 416:
      return "Range Not Satisfiable";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "";
  }
}

// The object's size as a 416 tells it: Content-Range "bytes */N", or what
// the dialect read in the body.
std::optional<uint64_t> SizeOf416(const Response& r, const ErrorDetail& d) {
  const auto cr = ParseContentRange(r.content_range);
  if (cr && cr->total) return cr->total;
  return d.object_size;
}

}  // namespace

const char* RetryCauseName(RetryCause cause) {
  switch (cause) {
    case RetryCause::k5xx:
      return "server error";
    case RetryCause::kThrottled:
      return "throttled";
    case RetryCause::kConnection:
      return "connection";
    case RetryCause::kTimeout:
      return "timeout";
    case RetryCause::kNone:
      break;
  }
  return "none";
}

void CountRetry(RetryCause cause, HttpStats* s) {
  switch (cause) {
    case RetryCause::k5xx:
      ++s->retries_5xx;
      break;
    case RetryCause::kThrottled:
      ++s->retries_throttled;
      break;
    case RetryCause::kConnection:
      ++s->retries_connection;
      break;
    case RetryCause::kTimeout:
      ++s->retries_timeout;
      break;
    case RetryCause::kNone:
      break;
  }
}

uint64_t BackoffCapNanos(const HttpOptions& o, uint32_t attempt) {
  constexpr uint64_t kNanosPerMs = 1'000'000;
  const auto ns = [](std::chrono::milliseconds ms) {
    return static_cast<uint64_t>(ms.count()) * kNanosPerMs;
  };
  return std::min<uint64_t>(ns(o.retry_max_backoff),
                            ns(o.retry_base_backoff)
                                << std::min<uint32_t>(attempt - 1, 30));
}

RetryDecision DecideRetry(const HttpOptions& o, const Attempt& a,
                          uint32_t attempts, uint64_t now_ns,
                          uint64_t deadline_ns, uint64_t jitter_ns) {
  const std::string deadline =
      "the deadline of " + std::to_string(o.deadline.count()) + " ms";
  if (attempts >= o.max_attempts) {
    return {false, 0,
            "gave up after " + std::to_string(attempts) + " attempts"};
  }
  if (now_ns >= deadline_ns) {
    return {false, 0,
            deadline + " passed during attempt " + std::to_string(attempts)};
  }
  const uint64_t wait = std::max(jitter_ns, a.retry_after_ns);
  if (now_ns + wait >= deadline_ns) {
    return {false, 0,
            "no time for attempt " + std::to_string(attempts + 1) + " within " +
                deadline};
  }
  return {true, wait, {}};
}

RetryCause RetryCauseOf(CURLcode rc) {
  switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
      return RetryCause::kConnection;
    case CURLE_OPERATION_TIMEDOUT:
      return RetryCause::kTimeout;
    default:
      return RetryCause::kNone;
  }
}

RetryCause RetryCauseOfHttp(long http_status) {
  if (http_status == 429 || http_status == 503) return RetryCause::kThrottled;
  if (http_status >= 500 && http_status <= 599) return RetryCause::k5xx;
  return RetryCause::kNone;
}

StatusCode StatusCodeOfHttp(long http_status) {
  switch (http_status) {
    case 404:
      return StatusCode::kNotFound;
    case 401:
    case 403:
      return StatusCode::kPermissionDenied;
    case 416:
      return StatusCode::kOutOfRange;
    default:
      return StatusCode::kIoError;
  }
}

std::optional<ContentRange> ParseContentRange(std::string_view value) {
  constexpr std::string_view kUnit = "bytes ";
  if (value.substr(0, kUnit.size()) != kUnit) return std::nullopt;
  value.remove_prefix(kUnit.size());
  const size_t slash = value.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  ContentRange cr;
  const std::string_view span = value.substr(0, slash);
  const std::string_view total = value.substr(slash + 1);
  if (total != "*") {
    uint64_t t = 0;
    // UINT64_MAX is no size an object can have (its last byte would be
    // past 2^64 - 1), and it is the transport's "unknown size".
    if (!ParseU64(total, &t) || t == UINT64_MAX) return std::nullopt;
    cr.total = t;
  }
  if (span == "*") {
    cr.unsatisfied = true;
    return cr;
  }
  const size_t dash = span.find('-');
  if (dash == std::string_view::npos ||
      !ParseU64(span.substr(0, dash), &cr.first) ||
      !ParseU64(span.substr(dash + 1), &cr.last) || cr.last < cr.first) {
    return std::nullopt;
  }
  return cr;
}

std::string RangeHeaderValue(ByteRange range) {
  return "bytes=" + std::to_string(range.offset) + "-" +
         std::to_string(range.end() - 1);
}

uint64_t RetryAfterNanos(const std::string& value, std::time_t now) {
  uint64_t secs = 0;
  if (ParseU64(value, &secs)) {
    return std::min(secs, kMaxRetryAfterSeconds) * kNanosPerSecond;
  }
  const std::time_t when = curl_getdate(value.c_str(), nullptr);
  if (when <= now) return 0;  // past, or -1: not a date
  return std::min(static_cast<uint64_t>(when - now), kMaxRetryAfterSeconds) *
         kNanosPerSecond;
}

void Response::AddHeaderLine(std::string_view line) {
  if (line.substr(0, 5) == "HTTP/") {
    content_length = -1;
    content_range.clear();
    retry_after.clear();
    etag.clear();
    last_modified.clear();
    return;
  }
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return;
  const std::string_view name = TrimSpace(line.substr(0, colon));
  const std::string_view value = TrimSpace(line.substr(colon + 1));
  if (EqualsNoCase(name, "content-range")) {
    content_range = std::string(value);
  } else if (EqualsNoCase(name, "retry-after")) {
    retry_after = std::string(value);
  } else if (EqualsNoCase(name, "etag")) {
    etag = std::string(value);
  } else if (EqualsNoCase(name, "last-modified")) {
    last_modified = std::string(value);
  } else if (EqualsNoCase(name, "content-length")) {
    uint64_t v = 0;
    if (ParseU64(value, &v) && v <= INT64_MAX) {
      content_length = static_cast<int64_t>(v);
    }
  }
}

Result<std::optional<uint64_t>> CheckDataHeaders(std::string_view what,
                                                 ByteRange range,
                                                 const Response& r) {
  const std::string w(what);
  if (r.status == 200) {
    // A server that ignores Range sends the whole object: acceptable only
    // when the whole object is what was asked for.
    if (range.offset == 0 && r.content_length >= 0 &&
        static_cast<uint64_t>(r.content_length) == range.length) {
      return std::optional<uint64_t>(range.length);
    }
    return Status::IoError(
        w + ": the server ignored the Range header (" +
        RangeHeaderValue(range) + ") and answered 200 OK with " +
        (r.content_length >= 0 ? std::to_string(r.content_length)
                               : std::string("an unknown number of")) +
        " bytes");
  }
  const std::optional<ContentRange> cr = ParseContentRange(r.content_range);
  if (!cr || cr->unsatisfied || cr->first != range.offset ||
      cr->last != range.end() - 1) {
    return Status::IoError(w + ": asked for " + RangeHeaderValue(range) +
                           ", got 206 with Content-Range '" +
                           ForeignText(r.content_range) + "'");
  }
  if (r.content_length >= 0 &&
      static_cast<uint64_t>(r.content_length) != range.length) {
    return Status::IoError(w + ": asked for " + RangeHeaderValue(range) +
                           ", got 206 with Content-Length " +
                           std::to_string(r.content_length));
  }
  return cr->total;
}

Attempt TransportError(std::string_view what, CURLcode rc, const char* errbuf) {
  const std::string text = ForeignText(
      errbuf != nullptr && errbuf[0] != '\0' ? errbuf : curl_easy_strerror(rc));
  return {Status::IoError(std::string(what) + ": " + text + " (curl error " +
                          std::to_string(rc) + ")"),
          RetryCauseOf(rc), 0, std::nullopt};
}

Attempt ErrorAnswer(std::string_view what, const Response& r,
                    const ErrorDetail& detail, std::time_t now) {
  std::string msg = std::string(what) + ": HTTP " + std::to_string(r.status);
  if (*ReasonPhrase(r.status)) msg += std::string(" ") + ReasonPhrase(r.status);
  msg += detail.text;
  if (r.status == 416) {
    if (const auto total = SizeOf416(r, detail)) {
      msg += " (the object has " + std::to_string(*total) + " bytes)";
    }
  }
  Attempt a;
  a.status =
      Status(detail.code.value_or(StatusCodeOfHttp(r.status)), std::move(msg));
  a.cause = detail.cause.value_or(RetryCauseOfHttp(r.status));
  if (a.cause != RetryCause::kNone && !r.retry_after.empty()) {
    a.retry_after_ns = RetryAfterNanos(r.retry_after, now);
  }
  return a;
}

Attempt JudgeAnswer(std::string_view what, ByteRange range, bool size_probe,
                    const Response& r, const HttpDialect* dialect,
                    std::time_t now) {
  if (r.status != 206 && r.status != 200) {
    const ErrorDetail detail = dialect != nullptr
                                   ? dialect->ReadErrorBody(r.error_body)
                                   : ErrorDetail{};
    // bytes=0-0 of an empty object: S3 answers 416 InvalidRange with
    // ActualObjectSize 0, RFC 9110 servers 416 with "bytes */0", Ceph RGW
    // 416 with neither. A 416 to bytes=0-0 means there is no byte 0, so an
    // answer that does not state another size says the object is empty.
    if (size_probe && r.status == 416 &&
        SizeOf416(r, detail).value_or(0) == 0) {
      return {Status::OK(), RetryCause::kNone, 0, 0};
    }
    return ErrorAnswer(what, r, detail, now);
  }
  // nginx answers bytes=0-0 of an empty object with 200 and no body (the
  // whole, empty, object).
  if (size_probe && r.status == 200 && r.content_length == 0) {
    return {Status::OK(), RetryCause::kNone, 0, 0};
  }
  Attempt a;
  if (!r.body_started) {  // no body at all: check the headers now
    auto size = CheckDataHeaders(what, range, r);
    if (!size.ok()) return {size.status(), RetryCause::kNone, 0, std::nullopt};
    a.object_size = *size;
  }
  if (r.received != range.length) {
    // The connection ended cleanly but early (a lying Content-Length, a
    // proxy that cut the body): retry, never hand out short data.
    a.status = Status::IoError(std::string(what) + ": the body ended after " +
                               std::to_string(r.received) + " of " +
                               std::to_string(range.length) + " bytes");
    a.cause = RetryCause::kConnection;
  }
  return a;
}

}  // namespace rangeio::detail
