// transfer.cc — one range GET on a libcurl easy handle: its options, the
// header and body callbacks that write the answer straight into the read's
// buffer, and the verdict on a finished attempt. Loop thread only.
#include "http/transfer.h"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <string_view>

#include "clock.h"
#include "parse_text.h"

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

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  const size_t len = size * n;
  t.got_first_byte = true;
  t.last_progress_ns = NowNanos();
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
    return len;
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
  set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
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

Attempt JudgeTransfer(Transfer& t, CURLcode rc) {
  if (!t.write_error.ok()) return {t.write_error, RetryCause::kNone, 0, {}};
  curl_easy_getinfo(t.easy, CURLINFO_RESPONSE_CODE, &t.response.status);
  if (rc != CURLE_OK) {
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
  Attempt a = JudgeAnswer(t.What(), t.range, t.size_probe, t.response,
                          t.target->dialect.get(), std::time(nullptr));
  if (a.object_size) {
    Status st = NoteSize(t, *a.object_size);
    if (!st.ok()) return {std::move(st), RetryCause::kNone, 0, {}};
  }
  return a;
}

}  // namespace rangeio::detail
