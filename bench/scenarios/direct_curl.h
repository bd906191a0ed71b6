// direct_curl.h — the `direct` baseline of the HTTP benchmarks: plain
// libcurl multi, one GET per range, C in flight, no scheduler. What the
// server and the network allow, against which rangeio's rows are measured.
//
// Thread-safety: a DirectCurl is used by one thread at a time.
#pragma once

#include <curl/curl.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "rangeio/byte_range.h"
#include "rangeio/stats.h"
#include "rangeio/status.h"

namespace rangeio::bench {

struct DirectFigures {
  double elapsed_ms = 0;
  uint64_t reads = 0;
  uint64_t gets = 0;
  uint64_t bytes = 0;
  LatencyHistogram latency;  // send to last byte, per GET
};

// What a direct GET sends: the URL, the S3 signing (none for plain HTTP),
// and TLS settings as the source under test has them.
struct DirectTarget {
  std::string url;
  // Sets signing options on each handle (SigV4 for S3); empty: none.
  std::function<void(CURL*)> configure;
  bool verify_tls = true;
  std::string ca_file;
};

// A multi handle kept across runs, with its connection cache: rangeio's
// shared event loop keeps its connections warm from round to round too.
class DirectCurl {
 public:
  explicit DirectCurl(uint32_t concurrency);
  DirectCurl(const DirectCurl&) = delete;
  DirectCurl& operator=(const DirectCurl&) = delete;
  ~DirectCurl();

  // Runs `concurrency` transfers, each starting the next range that
  // `next()` gives when it completes, until `next()` gives none or
  // `deadline` passes (then transfers in flight are abandoned, not
  // counted). Every answer must be 206 with exactly the range's length.
  Status Run(const DirectTarget& target,
             const std::function<std::optional<ByteRange>()>& next,
             std::chrono::steady_clock::time_point deadline, DirectFigures* f);

 private:
  CURLM* multi_;
  uint32_t concurrency_;
};

}  // namespace rangeio::bench
