// curl_engine.h (internal) — the event loop behind every HTTP and S3 source.
//
// One process-wide thread drives one libcurl multi handle. A source
// describes its object once (HttpTarget: URL, headers, signing, options) and
// submits range GETs; the loop adds them to the multi handle, writes each
// body straight into the read's buffer, checks the answer (206 with the
// exact Content-Range), retries what is worth retrying after a backoff, and
// completes each read exactly once by calling its sink on the loop thread.
//
// Why one shared loop rather than one per source: a reader of a table opens
// hundreds of objects in one bucket, and one multi handle shares its
// connection pool (and TLS sessions, DNS cache) across all of them, so a new
// source reuses warm connections instead of paying new handshakes; it also
// costs one thread however many sources are open. The loop thread starts with
// the first source (CurlEngine::Shared) and stops once the last one is gone.
//
// Thread-safety: CurlEngine's public methods may be called from any thread,
// the loop thread included (a completion callback may submit the next read).
// HttpTarget is immutable once made, except its size cache and stats, which
// are thread-safe.
#pragma once

#include <curl/curl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "rangeio/byte_range.h"
#include "rangeio/http.h"
#include "rangeio/slice.h"
#include "rangeio/source.h"

namespace rangeio::detail {

class EngineCore;

// What makes a failed attempt worth another one.
enum class RetryCause { kNone, k5xx, kThrottled, kConnection, kTimeout };

// Thread-safe HttpStats.
class HttpStatsRecorder {
 public:
  HttpStats Snapshot() const {
    std::lock_guard lk(mu_);
    return s_;
  }
  template <typename F>
  void Update(F f) {
    std::lock_guard lk(mu_);
    f(s_);
  }

 private:
  mutable std::mutex mu_;
  HttpStats s_;
};

// One object as the engine reads it. Made by a source at open, shared with
// every transfer in flight (which keep it alive).
struct HttpTarget {
  HttpTarget() = default;
  HttpTarget(const HttpTarget&) = delete;
  HttpTarget& operator=(const HttpTarget&) = delete;
  ~HttpTarget() { curl_slist_free_all(headers); }

  std::string url;   // what is sent (percent-encoded; may hold user:password)
  std::string name;  // what Source::name() returns: no secret
  std::string shown_url;  // `url` as errors show it: no user:password
  HttpOptions options;
  bool follow_redirects = true;  // off for S3 (a redirect breaks signing)
  bool path_as_is = false;       // on for S3: keys may hold "./" or "../"

  // S3 only.
  bool s3 = false;
  std::string bucket;
  std::string key;
  std::string sigv4;  // CURLOPT_AWS_SIGV4 ("aws:amz:REGION:s3"); empty: none
  std::string access_key_id;
  std::string secret_access_key;
  curl_slist* headers = nullptr;  // owned; x-amz-content-sha256, token

  // The object's size: size_hint, or the total of the first Content-Range.
  static constexpr uint64_t kUnknownSize = UINT64_MAX;
  std::atomic<uint64_t> size{kUnknownSize};

  HttpStatsRecorder stats;

  // " (bucket 'b', key 'k')" for S3, "" otherwise: errors name both.
  std::string S3Context() const;
};

// A handle on the shared loop. Sources hold one; the loop stops when the
// last handle is destroyed (which every source outlives its reads by).
class CurlEngine {
 public:
  // The process-wide engine, started on first use.
  static Result<std::shared_ptr<CurlEngine>> Shared();

  explicit CurlEngine(std::shared_ptr<EngineCore> core);
  CurlEngine(const CurlEngine&) = delete;
  CurlEngine& operator=(const CurlEngine&) = delete;
  ~CurlEngine();

  // A source with this pool size joins / leaves: the multi handle's
  // per-host connection limit is the largest max_connections of the live
  // sources, and its idle-connection cache their sum (capped).
  void Register(uint32_t max_connections);
  void Unregister(uint32_t max_connections);

  // Reads `range` of `target` into `buffer` (range.length writable bytes at
  // `dst`) and calls sink->OnReadDone(tag, ...) exactly once, on the loop
  // thread. `size_probe`: the GET of bytes=0-0 made by Source::Size(), for
  // which a 416 carrying the size (an empty object) is a success.
  void Submit(std::shared_ptr<HttpTarget> target, ByteRange range, Slice buffer,
              std::byte* dst, ReadSink* sink, uint64_t tag,
              bool size_probe = false);

  // True on the loop thread (where blocking on a read would deadlock).
  bool OnLoopThread() const;

 private:
  std::shared_ptr<EngineCore> core_;
};

}  // namespace rangeio::detail
