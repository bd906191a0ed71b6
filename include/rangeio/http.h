// rangeio/http.h — objects read with ranged GETs over HTTP(S), and from S3.
//
// OpenHttpSource reads an http:// or https:// URL; OpenS3Source reads
// s3://bucket/key from AWS S3 or any S3-compatible store (MinIO, Ceph, ...),
// signing each request with AWS Signature Version 4. Both are Sources: give
// them to Reader::Open like any other.
//
// Every read is one `GET` with `Range: bytes=first-last`. The answer must be
// `206 Partial Content` with a `Content-Range` that names exactly the
// requested bytes, and its body is written straight into the read's
// destination buffer; a body shorter or longer than announced, another
// range, or a `200` with the whole object (unless the whole object was
// asked for) is an error, never data. No `HEAD` is ever sent: the size comes
// from HttpOptions::size_hint, or from the `Content-Range` of the first
// ranged GET (see Source::Size below).
//
// Requests run on one process-wide event-loop thread that drives a libcurl
// multi handle; it starts with the first source opened and stops when the
// last one is destroyed. Connections are kept alive and reused across reads
// and across sources on the same host (HTTP/2 multiplexing where the server
// offers it over TLS, HTTP/1.1 otherwise). Completions are delivered on that
// thread.
//
// Failures are retried with exponential backoff and full jitter when they
// are worth retrying: HTTP 5xx, 429, S3 `SlowDown`, a connection refused,
// reset or closed mid-body, and timeouts (connect, first byte, stalled
// body). A `Retry-After` header sets the wait when it is longer than the
// backoff. Other 4xx answers are final. A retry asks for the same range again
// and writes it into the same buffer from its start.
//
// Errors name the cause: the URL (never a credential), the HTTP status, and
// for S3 the error code and message of the XML body (`NoSuchKey`,
// `AccessDenied`, `InvalidAccessKeyId`, `SignatureDoesNotMatch`, ...) with
// the bucket and key; the Reader adds the range and the source's name.
// Status codes: 404 / NoSuchKey / NoSuchBucket -> NotFound; 401, 403 ->
// PermissionDenied; 416 -> OutOfRange; everything else -> IoError.
//
// Thread-safety: as Source (every method may be called from any thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "rangeio/export.h"
#include "rangeio/source.h"
#include "rangeio/stats.h"
#include "rangeio/status.h"

namespace rangeio {

// How an object is read over HTTP(S): time-outs, retries, TLS, connections.
// One per source; docs/options.md has every field's key, range and reason.
struct RANGEIO_EXPORT HttpOptions {
  // --- What most users set ---

  // Key "size-hint": the object's size when the caller knows it (a manifest,
  // a listing): Size() then sends no request.
  std::optional<uint64_t> size_hint;
  // Key "max-connections": connections per host and idle ones kept; size it
  // like the limiter's io_concurrency (64, its default). Valid 1..4096.
  uint32_t max_connections = 64;
  // Keys "verify-tls", "ca-file": check the server's certificate (turn off
  // only for a test server), against this CA bundle (empty: the system's).
  bool verify_tls = true;
  std::string ca_file;

  // --- Time-outs and retries: most users should leave these alone ---

  // Key "connect-timeout-ms": TCP and TLS connect, per attempt. 5 s: a
  // same-region connect takes under 10 ms; the AWS SDKs use 1-10 s.
  std::chrono::milliseconds connect_timeout{5'000};
  // Key "first-byte-timeout-ms": request to first byte, per attempt. 10 s:
  // S3's first-byte p99.99 is about a second.
  std::chrono::milliseconds first_byte_timeout{10'000};
  // Key "stall-timeout-ms": longest pause inside a body. 5 s: at S3's
  // 80-90 MB/s per connection, that is a dead peer, not congestion.
  std::chrono::milliseconds stall_timeout{5'000};
  // Key "min-bytes-per-second": slowest body accepted once stall_timeout
  // has passed (0: no limit); 1024: a thousandth of a 1 MB/s link.
  uint64_t min_bytes_per_second = 1024;
  // Key "max-attempts": attempts per read, the first included (1: never
  // retry). 5: boto's legacy mode, rides out a short SlowDown burst.
  uint32_t max_attempts = 5;
  // Keys "retry-base-backoff-ms", "retry-max-backoff-ms": retry n waits
  // uniform in [0, min(max, base x 2^(n-1))] ("full jitter", AWS
  // Architecture Blog). 50 ms and 5 s: near the AWS SDKs' 100 ms base.
  std::chrono::milliseconds retry_base_backoff{50};
  std::chrono::milliseconds retry_max_backoff{5'000};
  // Key "deadline-ms": one read's total: every attempt, every backoff, and
  // every wait for a slot of its endpoint's adaptive limit. 60 s.
  std::chrono::milliseconds deadline{60'000};
  // Key "adaptive" (on, off): requests in flight per endpoint (and bucket)
  // follow one limit shared by the process, cut on 429/503/SlowDown and
  // grown back near the latency floor (docs/http-s3.md). On: it costs
  // nothing unthrottled.
  bool adaptive = true;

  Status Validate() const;
  bool operator==(const HttpOptions&) const = default;
};

enum class S3Addressing {
  // Virtual-hosted style for AWS endpoints (*.amazonaws.com) when the bucket
  // name is a valid DNS label without dots, path style otherwise (what
  // S3-compatible stores on a custom endpoint expect).
  kAuto,
  kPath,           // https://endpoint/bucket/key
  kVirtualHosted,  // https://bucket.endpoint/key
};

// Where an S3 object lives and who reads it; how it is read over HTTP
// (time-outs, retries, TLS, connections) is the HttpOptions beside it.
struct RANGEIO_EXPORT S3Options {
  // Key "endpoint": e.g. "https://s3.eu-west-1.amazonaws.com" or
  // "http://127.0.0.1:9000". Empty: $AWS_ENDPOINT_URL_S3, then
  // $AWS_ENDPOINT_URL, then https://s3.REGION.amazonaws.com.
  std::string endpoint;
  // Key "region": the signing region. Empty: $AWS_REGION, then
  // $AWS_DEFAULT_REGION, then "us-east-1" (the AWS tools' default for S3).
  std::string region;
  // Key "addressing" (auto, path, virtual-hosted).
  S3Addressing addressing = S3Addressing::kAuto;

  // Credentials, resolved when the source is opened: these fields (keys
  // "access-key-id", "secret-access-key", "session-token"); unless
  // `profile` is set, $AWS_ACCESS_KEY_ID and $AWS_SECRET_ACCESS_KEY
  // (+ $AWS_SESSION_TOKEN); then the shared credentials file
  // ($AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials), section `profile`
  // (key "profile"), else $AWS_PROFILE, else "default". None found is an
  // error unless `anonymous` (key "anonymous": unsigned, public buckets).
  // Secrets never appear in errors, logs or stats.
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  std::string profile;
  bool anonymous = false;

  Status Validate() const;
};

// The backend's own figures for one source, since it was opened.
struct RANGEIO_EXPORT HttpStats {
  uint64_t gets = 0;         // GET requests sent, every attempt and size probe
  uint64_t heads = 0;        // HEAD requests sent: always 0 (kept to prove it)
  uint64_t size_probes = 0;  // GETs of bytes=0-0 made by Size()
  uint64_t reads_ok = 0;     // Read()s completed with their bytes
  uint64_t reads_failed = 0;
  uint64_t bytes = 0;            // body bytes received into read buffers
  uint64_t http2_responses = 0;  // answers that came over HTTP/2
  // Retries by the cause of the failed attempt.
  uint64_t retries_5xx = 0;         // HTTP 5xx other than 503 SlowDown
  uint64_t retries_throttled = 0;   // 429, 503 SlowDown / 503 (throttling)
  uint64_t retries_connection = 0;  // refused, reset, closed mid-body
  uint64_t retries_timeout = 0;     // connect, first byte, stall
  uint64_t throttled = 0;           // attempts answered 429, 503 or S3 SlowDown
  // Adaptive concurrency of the source's endpoint (shared with every source
  // of it; all 0 when HttpOptions::adaptive is off): the limit now and its
  // lowest, the throttled answers the endpoint got, and the time its limit
  // spent below max_connections because of them.
  uint32_t endpoint_limit = 0;
  uint32_t endpoint_min_limit = 0;
  uint64_t endpoint_throttles = 0;
  uint64_t endpoint_throttled_ns = 0;
  LatencyHistogram time_to_first_byte;  // per attempt: send to first byte
  LatencyHistogram latency;  // per read: Read() to completion, retries in

  uint64_t retries() const {
    return retries_5xx + retries_throttled + retries_connection +
           retries_timeout;
  }
  // One line per figure, for humans.
  std::string ToString() const;
};

// A source reading `url` (http:// or https://) with ranged GETs. No I/O
// happens here: InvalidArgument for a malformed URL or invalid options.
//
// Size(): size_hint when given; otherwise the total of the first
// Content-Range seen (by a read, or by one `GET bytes=0-0` that Size() sends
// itself when no read has completed yet), cached. Never a HEAD.
RANGEIO_EXPORT Result<std::shared_ptr<Source>> OpenHttpSource(
    const std::string& url, const HttpOptions& options = {});

// A source reading s3://bucket/key. The key may hold any character (spaces,
// '+', '=', '%', unicode, '/'): it is sent percent-encoded as S3 requires
// (RFC 3986 unreserved characters and '/' as they are, every other byte as
// %XX). InvalidArgument for a malformed URL or invalid options;
// PermissionDenied when no credentials are found (see S3Options). No I/O.
// Size() as for OpenHttpSource.
RANGEIO_EXPORT Result<std::shared_ptr<Source>> OpenS3Source(
    const std::string& s3_url, const S3Options& options = {},
    const HttpOptions& http = {});

// The backend stats of a source made by OpenHttpSource or OpenS3Source,
// also behind decorators (SourceWrapper: a BlockCache, ...);
// InvalidArgument for any other source.
RANGEIO_EXPORT Result<HttpStats> GetHttpStats(const Source& source);

}  // namespace rangeio
