// http_dialect.h (internal) — what a protocol on top of HTTP adds to the
// transport: how it signs a request and how it reads an error answer.
//
// The transport (src/http/) speaks plain HTTP range GETs. A source whose
// server speaks a richer protocol (S3: SigV4 signing, XML error documents
// with codes such as SlowDown or NoSuchKey) gives its HttpTarget a dialect,
// and the transport calls it at the two points where the protocol matters.
// Plain HTTP sources have none.
//
// Thread-safety: a dialect is immutable once made and shared by every
// transfer of its target; its methods are const and called on the loop
// thread (and by tests on any thread).
#pragma once

#include <curl/curl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/http_response.h"

namespace rangeio::detail {

class HttpDialect {
 public:
  virtual ~HttpDialect() = default;

  // Sets the dialect's options on a read's easy handle (credentials, signing,
  // extra headers). Any string or list it passes must live as long as the
  // dialect. Returns the first libcurl error, CURLE_OK on success.
  virtual CURLcode Configure(CURL* easy) const = 0;

  // The extra header lines Configure sets (CURLOPT_HTTPHEADER), for a read
  // that must add its own (If-Match) to them.
  virtual std::vector<std::string> HeaderLines() const { return {}; }

  // What the body of an error answer (a non-2xx status, at most
  // kMaxErrorBody bytes) says beyond its HTTP status.
  virtual ErrorDetail ReadErrorBody(std::string_view body) const = 0;
};

}  // namespace rangeio::detail
