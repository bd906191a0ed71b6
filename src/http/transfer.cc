// transfer.cc — one range GET on a libcurl easy handle: its options, the
// header and body callbacks that write the answer straight into the read's
// buffer, and the verdict on a finished attempt. Loop thread only.
#include "http/transfer.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <optional>
#include <string_view>
#include <vector>

#include "util/clock.h"
#include "util/parse_text.h"
#include "util/redact.h"

namespace rangeio::detail {
namespace {

// Redirects followed by plain HTTP sources (a signing dialect turns them
// off: a redirect would need a new signature). 5: what browsers tolerate
// many times over.
constexpr long kMaxRedirects = 5;

// Records a total seen in an answer; an error when it contradicts the size
// already known (the object was replaced, or size_hint is wrong).
Status NoteSize(Transfer& t, uint64_t total) {
  uint64_t known = HttpTarget::kUnknownSize;
  if (t.target->size.compare_exchange_strong(known, total) || known == total) {
    return Status::OK();
  }
  return Status::IoError(t.What() + ": the object has " +
                         std::to_string(total) + " bytes, not the " +
                         std::to_string(known) +
                         " bytes it had or was said to have (replaced while "
                         "being read, or a wrong size_hint?)");
}

// The validator an answer pins: a strong ETag (a weak one, W/"...", never
// matches an If-Match), else Last-Modified. A value with a control
// character is never pinned: it would go into a request header.
HttpTarget::VersionPin ValidatorOf(const Response& r) {
  HttpTarget::VersionPin v;
  if (!r.etag.empty() && !StartsWithNoCase(r.etag, "w/") &&
      !HasControlChars(r.etag)) {
    v.etag = r.etag;
  } else if (!r.last_modified.empty() && !HasControlChars(r.last_modified)) {
    v.last_modified = r.last_modified;
  }
  return v;
}

Status Changed(const Transfer& t, std::string_view what, std::string_view was,
               std::string_view now) {
  return Status::IoError(
      t.What() + ": the object changed while being read: its " +
      std::string(what) + " was '" + ForeignText(was) + "', now '" +
      ForeignText(now) + "' (reads of one source never mix two versions)");
}

// Pins the version on the first answer; an error when a later answer is
// of another version (a server that ignored If-Match).
Status CheckVersion(const Transfer& t) {
  const HttpTarget::VersionPin seen = ValidatorOf(t.response);
  if (seen.empty()) return Status::OK();  // nothing to pin or compare
  const HttpTarget::VersionPin pin = t.target->PinOnce(seen);
  const Response& r = t.response;
  if (!pin.etag.empty() && !r.etag.empty() && r.etag != pin.etag) {
    return Changed(t, "ETag", pin.etag, r.etag);
  }
  if (!pin.last_modified.empty() && !r.last_modified.empty() &&
      r.last_modified != pin.last_modified) {
    return Changed(t, "Last-Modified", pin.last_modified, r.last_modified);
  }
  return Status::OK();
}

uint64_t ToNanos(std::chrono::milliseconds ms) {
  return static_cast<uint64_t>(ms.count()) * 1'000'000;
}

// The body's average speed since its first byte, once stall_timeout has
// passed, against HttpOptions::min_bytes_per_second.
std::optional<std::string> TooSlow(const Transfer& t, uint64_t now) {
  const HttpOptions& o = t.target->options;
  const uint64_t window = ToNanos(o.stall_timeout);
  if (o.min_bytes_per_second == 0 || now <= t.first_byte_ns ||
      now - t.first_byte_ns < window) {
    return std::nullopt;
  }
  const double seconds = static_cast<double>(now - t.first_byte_ns) / 1e9;
  const double rate = static_cast<double>(t.response.received) / seconds;
  if (rate >= static_cast<double>(o.min_bytes_per_second)) return std::nullopt;
  return "the body came at " + std::to_string(static_cast<uint64_t>(rate)) +
         " B/s over " + std::to_string(static_cast<uint64_t>(seconds * 1e3)) +
         " ms, below min_bytes_per_second " +
         std::to_string(o.min_bytes_per_second) + " (" +
         std::to_string(t.response.received) + " of " +
         std::to_string(t.range.length) + " bytes)";
}

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  const size_t len = size * n;
  t.last_progress_ns = NowNanos();
  if (!t.got_first_byte) t.first_byte_ns = t.last_progress_ns;
  t.got_first_byte = true;
  t.response.AddHeaderLine(std::string_view(data, len));
  return len;
}

// The first call of OnBody: decides whether the body is the range's bytes
// (a 200 or 206 whose headers check out) or an error document.
Status StartBody(Transfer& t) {
  Response& r = t.response;
  r.body_started = true;
  curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &r.status);
  if (r.status != 206 && r.status != 200) return Status::OK();
  auto size = CheckDataHeaders(t.What(), t.range, r);
  if (!size.ok()) return size.status();
  if (*size) RANGEIO_RETURN_NOT_OK(NoteSize(t, **size));
  RANGEIO_RETURN_NOT_OK(CheckVersion(t));
  t.body_is_data = true;
  return Status::OK();
}

size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  Response& r = t.response;
  const size_t len = size * n;
  t.last_progress_ns = NowNanos();
  if (!r.body_started) {
    t.write_error = StartBody(t);
    if (!t.write_error.ok()) return 0;  // aborts with CURLE_WRITE_ERROR
  }
  if (!t.body_is_data) {  // an error document
    const size_t room = kMaxErrorBody - r.error_body.size();
    r.error_body.append(data, std::min(room, len));
    if (len < room) return len;
    // Enough to explain the error: reading the rest (a 404 of 10 GiB)
    // would hold the permit and the connection for nothing.
    t.error_body_capped = true;
    return 0;  // aborts with CURLE_WRITE_ERROR; judged as a whole answer
  }
  if (len > t.range.length - r.received) {
    t.write_error =
        Status::IoError(t.What() + ": the body is longer than the " +
                        std::to_string(t.range.length) +
                        " bytes announced for " + RangeHeaderValue(t.range));
    return 0;
  }
  std::memcpy(t.dst + r.received, data, len);
  r.received += len;
  return len;
}

}  // namespace

void Transfer::ResetAttempt(uint64_t now) {
  attempt_start_ns = now;
  last_progress_ns = now;
  got_first_byte = false;
  first_byte_ns = 0;
  error_body_capped = false;
  body_is_data = false;
  response = Response();
  write_error = Status::OK();
  errbuf[0] = '\0';
}

Status ConfigureTransfer(Transfer& t) {
  CURL* e = t.easy;
  const HttpTarget& g = *t.target;
  const HttpOptions& o = g.options;
  const std::string range =
      std::to_string(t.range.offset) + "-" + std::to_string(t.range.end() - 1);
  CURLcode rc = CURLE_OK;
  const auto set = [&](CURLoption opt, auto value) {
    if (rc == CURLE_OK) rc = curl_easy_setopt(e, opt, value);
  };
  set(CURLOPT_URL, g.url.c_str());
  set(CURLOPT_RANGE, range.c_str());
  set(CURLOPT_PRIVATE, static_cast<void*>(&t));
  set(CURLOPT_WRITEFUNCTION, &OnBody);
  set(CURLOPT_WRITEDATA, static_cast<void*>(&t));
  set(CURLOPT_HEADERFUNCTION, &OnHeader);
  set(CURLOPT_HEADERDATA, static_cast<void*>(&t));
  set(CURLOPT_ERRORBUFFER, t.errbuf);
  set(CURLOPT_NOSIGNAL, 1L);
  set(CURLOPT_PROTOCOLS_STR, "http,https");
  // Never from https down to cleartext http: the data (and a signed
  // request's headers) would travel unprotected.
  set(CURLOPT_REDIR_PROTOCOLS_STR,
      StartsWithNoCase(g.url, "https://") ? "https" : "http,https");
  set(CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_2TLS));
  // Over TLS a new host's transfers wait for its first connection's
  // handshake, whose ALPN says whether HTTP/2 lets them share it, rather
  // than each opening a connection. Never for cleartext: HTTP/2 is only
  // asked for over TLS here, yet libcurl would hold them until the first
  // answer had come back, a whole request's latency (bench blob shows it).
  if (StartsWithNoCase(g.url, "https://")) set(CURLOPT_PIPEWAIT, 1L);
  set(CURLOPT_TCP_KEEPALIVE, 1L);
  set(CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(o.connect_timeout.count()));
  set(CURLOPT_FOLLOWLOCATION, g.follow_redirects ? 1L : 0L);
  set(CURLOPT_MAXREDIRS, kMaxRedirects);
  set(CURLOPT_PATH_AS_IS, g.path_as_is ? 1L : 0L);
  set(CURLOPT_SSL_VERIFYPEER, o.verify_tls ? 1L : 0L);
  set(CURLOPT_SSL_VERIFYHOST, o.verify_tls ? 2L : 0L);
  if (!o.ca_file.empty()) set(CURLOPT_CAINFO, o.ca_file.c_str());
  set(CURLOPT_USERAGENT, "rangeio/0.1");
  if (rc == CURLE_OK && g.dialect != nullptr) rc = g.dialect->Configure(e);
  if (rc != CURLE_OK) {
    return Status::Internal("configuring a libcurl transfer for " + t.What() +
                            ": " + curl_easy_strerror(rc));
  }
  return Status::OK();
}

// Why the current attempt of `t` has timed out at `now`; nullopt if not.
std::optional<std::string> AttemptTimedOut(const Transfer& t, uint64_t now) {
  const HttpOptions& o = t.target->options;
  if (now >= t.deadline_ns) {
    // A timeout like the others: AttemptEnded sees the deadline passed
    // and fails the read with the error of the attempt before, which
    // says why it was still retrying.
    return "no complete answer within the deadline of " +
           std::to_string(o.deadline.count()) + " ms";
  }
  if (!t.got_first_byte) {
    curl_off_t sent_us = 0;  // 0 until the request has gone out
    curl_easy_getinfo(t.easy, CURLINFO_PRETRANSFER_TIME_T, &sent_us);
    const uint64_t sent = t.attempt_start_ns + sent_us * 1000;
    if (sent_us > 0 && now > sent &&
        now - sent > ToNanos(o.first_byte_timeout)) {
      return "no answer within the " +
             std::to_string(o.first_byte_timeout.count()) +
             " ms first-byte timeout";
    }
    return std::nullopt;
  }
  if (now > t.last_progress_ns &&
      now - t.last_progress_ns > ToNanos(o.stall_timeout)) {
    return "the body stalled for " + std::to_string(o.stall_timeout.count()) +
           " ms after " + std::to_string(t.response.received) + " of " +
           std::to_string(t.range.length) + " bytes";
  }
  return TooSlow(t, now);
}

Status DeadlinePassedBeforeAttempt(const Transfer& t) {
  return Status::IoError(t.What() + ": the deadline of " +
                         std::to_string(t.target->options.deadline.count()) +
                         " ms passed before attempt " +
                         std::to_string(t.attempt + 1));
}

Status SlotWaitTimedOut(const Transfer& t, uint64_t now) {
  const EndpointLimit::Snapshot e = t.target->endpoint->Get(now);
  const uint64_t waited_ms = (now - t.gated_since_ns) / 1'000'000;
  return Status::IoError(
      t.What() + ": " + RangeHeaderValue(t.range) +
      " timed out waiting for an endpoint slot: the deadline of " +
      std::to_string(t.target->options.deadline.count()) + " ms passed after " +
      std::to_string(waited_ms) +
      " ms in the queue, the endpoint at its limit (" +
      std::to_string(e.in_flight) + " in flight, limit " +
      std::to_string(e.limit) + ")");
}

Status ApplyVersionPin(Transfer& t) {
  const HttpTarget::VersionPin pin = t.target->Pin();
  if (pin.empty() || (pin.etag == t.sent_pin.etag &&
                      pin.last_modified == t.sent_pin.last_modified)) {
    return Status::OK();  // nothing pinned, or already sent
  }
  std::vector<std::string> lines;
  if (t.target->dialect != nullptr) lines = t.target->dialect->HeaderLines();
  lines.push_back(pin.etag.empty() ? "If-Unmodified-Since: " + pin.last_modified
                                   : "If-Match: " + pin.etag);
  curl_slist* list = nullptr;
  for (const std::string& line : lines) {
    curl_slist* l = curl_slist_append(list, line.c_str());
    if (l == nullptr) {
      curl_slist_free_all(list);
      return Status::Internal("curl_slist_append failed");
    }
    list = l;
  }
  const CURLcode rc = curl_easy_setopt(t.easy, CURLOPT_HTTPHEADER, list);
  if (rc != CURLE_OK) {
    curl_slist_free_all(list);
    return Status::Internal("configuring If-Match for " + t.What() + ": " +
                            curl_easy_strerror(rc));
  }
  curl_slist_free_all(t.headers);  // no longer referenced by the handle
  t.headers = list;
  t.sent_pin = pin;
  return Status::OK();
}

Attempt JudgeTransfer(Transfer& t, CURLcode rc) {
  if (!t.write_error.ok()) return {t.write_error, RetryCause::kNone, 0, {}};
  curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &t.response.status);
  const bool capped = rc == CURLE_WRITE_ERROR && t.error_body_capped;
  if (rc != CURLE_OK && !capped) {
    Attempt a = TransportError(t.What(), rc, t.errbuf);
    curl_off_t connect_us = 0;
    curl_easy_getinfo(t.easy, CURLINFO_CONNECT_TIME_T, &connect_us);
    if (rc == CURLE_OPERATION_TIMEDOUT && connect_us == 0 &&
        t.response.status == 0 && !t.target->answered) {
      a.cause = RetryCause::kNone;
      a.status = Status::IoError(
          a.status.message() + " (no connection within connect_timeout " +
          std::to_string(t.target->options.connect_timeout.count()) +
          " ms, and this source has had no answer yet: not retried)");
    }
    return a;
  }
  t.target->answered = true;
  if (t.response.status == 412 && !t.sent_pin.empty()) {
    const bool etag = !t.sent_pin.etag.empty();
    return {Status::IoError(t.What() +
                            ": the object changed while being read "
                            "(HTTP 412 Precondition Failed for " +
                            (etag ? "If-Match: " + ForeignText(t.sent_pin.etag)
                                  : "If-Unmodified-Since: " +
                                        ForeignText(t.sent_pin.last_modified)) +
                            "; reads of one source never mix two versions)"),
            RetryCause::kNone,
            0,
            {}};
  }
  Attempt a = JudgeAnswer(t.What(), t.range, t.size_probe, t.response,
                          t.target->dialect.get(), std::time(nullptr));
  if (a.object_size) {
    Status st = NoteSize(t, *a.object_size);
    if (!st.ok()) return {std::move(st), RetryCause::kNone, 0, {}};
  }
  return a;
}

}  // namespace rangeio::detail
