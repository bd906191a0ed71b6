// curl_engine.h (internal) — the event loop behind every HTTP and S3 source.
//
// One process-wide thread drives one libcurl multi handle. A source
// describes its object once (HttpTarget: URL, options, dialect) and
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
// are thread-safe. The engine knows no protocol above HTTP: a target's
// HttpDialect signs its requests and reads its error bodies.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "http/endpoint_limit.h"
#include "http/http_dialect.h"
#include "rangeio/byte_range.h"
#include "rangeio/http.h"
#include "rangeio/slice.h"
#include "rangeio/source.h"
#include "util/mutex.h"

namespace rangeio::detail {

class EngineCore;

// Thread-safe HttpStats.
class HttpStatsRecorder {
 public:
  HttpStats Snapshot() const EXCLUDES(mu_) {
    MutexLock lk(mu_);
    return s_;
  }
  template <typename F>
  void Update(F f) EXCLUDES(mu_) {
    MutexLock lk(mu_);
    f(s_);
  }

 private:
  mutable Mutex mu_;
  HttpStats s_ GUARDED_BY(mu_);
};

// One object as the engine reads it. Made by a source at open, shared with
// every transfer in flight (which keep it alive).
struct HttpTarget {
  HttpTarget() = default;
  HttpTarget(const HttpTarget&) = delete;
  HttpTarget& operator=(const HttpTarget&) = delete;

  std::string url;   // what is sent (percent-encoded; may hold user:password)
  std::string name;  // what Source::name() returns: no secret
  // SourceInfo::cache_identity: the URL and endpoint, credentials as a hash.
  std::string identity;
  // Names the request in errors: "GET <url without user:password>", and
  // whatever the opener adds (S3: the bucket and key).
  std::string what;
  // SourceInfo::description: the protocol and how it is set up.
  std::string describe;
  HttpOptions options;
  bool follow_redirects = true;  // off when a redirect would break signing
  bool path_as_is = false;       // on when paths may hold "./" or "../"
  // Signing and error bodies of the protocol above HTTP; null: plain HTTP.
  std::unique_ptr<const HttpDialect> dialect;

  // The object's size: size_hint, or the total of the first Content-Range.
  static constexpr uint64_t kUnknownSize = UINT64_MAX;
  std::atomic<uint64_t> size{kUnknownSize};
  // Loop thread only: some attempt got an HTTP answer. Until then a connect
  // time-out is final (a wrong or unreachable address fails in one
  // connect_timeout, not in max_attempts of them); afterwards it is retried.
  bool answered = false;

  HttpStatsRecorder stats;
  // The adaptive limit of the endpoint (HttpOptions::adaptive); null: off,
  // attempts are bounded by the Limiter and max_connections only.
  std::shared_ptr<EndpointLimit> endpoint;

  // The version every read of this source must see: the validator of the
  // first answer (a strong ETag, else Last-Modified), sent as If-Match (or
  // If-Unmodified-Since) with every later request and compared with every
  // later answer, so that an object replaced mid-stream is an error, never
  // a mix of two versions' bytes. Empty until an answer sets it, and for
  // servers that send neither header (those reads are not pinned).
  struct VersionPin {
    std::string etag;
    std::string last_modified;
    bool empty() const { return etag.empty() && last_modified.empty(); }
  };
  VersionPin Pin() const EXCLUDES(pin_mu_) {
    MutexLock lk(pin_mu_);
    return pin_;
  }
  // Sets the pin if there is none yet; returns the pin in force.
  VersionPin PinOnce(VersionPin seen) EXCLUDES(pin_mu_) {
    MutexLock lk(pin_mu_);
    if (pin_.empty()) pin_ = std::move(seen);
    return pin_;
  }

 private:
  mutable Mutex pin_mu_;
  VersionPin pin_ GUARDED_BY(pin_mu_);
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

  // The read submitted as (sink, tag), or with Source::kAllReads every
  // transfer of `sink` the loop runs or waits to retry, leaves the multi
  // handle and completes with Cancelled, its connection closed
  // (Source::Cancel). Reads submitted after this call are not affected.
  void Cancel(const ReadSink* sink, uint64_t tag);

  // True on the loop thread (where blocking on a read would deadlock).
  bool OnLoopThread() const;

 private:
  std::shared_ptr<EngineCore> core_;
};

}  // namespace rangeio::detail
