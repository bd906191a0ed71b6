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

#include "rangeio/source.h"
#include "rangeio/stats.h"
#include "rangeio/status.h"

namespace rangeio {

struct HttpOptions {
  // Time to establish a TCP (and TLS) connection, per attempt. 5 s: a
  // loopback or same-region connect takes well under 10 ms, so 5 s only ever
  // fires on a dead or black-holed address; the AWS SDKs use 1-10 s.
  std::chrono::milliseconds connect_timeout{5'000};
  // From sending a request to the first byte of the answer, per attempt.
  // 10 s: S3 documents a first-byte latency of tens of milliseconds and a
  // p99.99 of about a second; a request that has not started answering after
  // 10 s is better re-sent (the retry goes to a fresh connection).
  std::chrono::milliseconds first_byte_timeout{10'000};
  // Longest pause in a body before the attempt is abandoned as stalled.
  // 5 s: at the 80-90 MB/s that S3 gives one connection, 5 s of silence is
  // never congestion; it is a dead peer or a stuck proxy.
  std::chrono::milliseconds stall_timeout{5'000};
  // Slowest body accepted, averaged from its first byte once stall_timeout
  // has passed (0: no limit): a body that trickles (a byte a second is no
  // stall) would otherwise hold its permit until the deadline. 1024 B/s: a
  // thousandth of the slowest link worth reading ranges over (1 MB/s), so
  // only a trickling peer or a broken proxy falls below it. Valid 0..2^40.
  uint64_t min_bytes_per_second = 1024;

  // Attempts per read, the first included (1 = never retry). 5: the AWS
  // SDKs' "standard" retry mode makes 3 attempts and boto's legacy mode 5;
  // 5 rides out a short 503 SlowDown burst, and the deadline bounds it.
  uint32_t max_attempts = 5;
  // Backoff before retry n (n = 1, 2, ...) is uniform in
  // [0, min(retry_max_backoff, retry_base_backoff * 2^(n-1))]: "full
  // jitter" (AWS Architecture Blog, "Exponential Backoff and Jitter"), which
  // spreads a burst of failed reads instead of re-sending them together.
  // 50 ms and 5 s: the AWS SDKs' standard mode uses a 100 ms base (S3's
  // first-byte latency is tens of ms, so 50 ms is the first step worth
  // waiting) and a 20 s cap; 5 s keeps a read's total within `deadline`.
  std::chrono::milliseconds retry_base_backoff{50};
  std::chrono::milliseconds retry_max_backoff{5'000};
  // Overall budget of one read, from Read() to its completion, across every
  // attempt and backoff. 60 s: several full timeouts plus backoffs fit; past
  // it the read fails with the last attempt's error.
  std::chrono::milliseconds deadline{60'000};

  // Verify the server's TLS certificate and host name. Only turn this off
  // for a test server with a self-signed certificate.
  bool verify_tls = true;
  // CA bundle to verify against; empty = libcurl's default (the system's).
  std::string ca_file;

  // Connections kept per host, and the pool of idle connections kept alive.
  // Size it like the limiter's io_concurrency: one connection per read in
  // flight over HTTP/1.1 (HTTP/2 multiplexes many reads on one). 64 =
  // Options::kDefaultIoConcurrency. Valid 1..4096.
  uint32_t max_connections = 64;

  // Adaptive concurrency: the requests in flight to this source's endpoint
  // (scheme, host and port; and bucket for S3) follow one limit shared by
  // every HTTP and S3 source of that endpoint in the process. A 429, 503 or
  // S3 SlowDown cuts it, a time to first byte near its floor lets it grow
  // back, between 1 and max_connections (the Limiter's io_concurrency still
  // bounds each reader). Requests past the limit wait, they are not sent to
  // be refused. On by default: with no throttling the limit stays at
  // max_connections, so it costs nothing (docs/http-s3.md, "Adaptive
  // concurrency", has the measurements and the rule).
  bool adaptive = true;

  // The object's size in bytes, when the caller knows it (a table manifest,
  // a listing): Size() then returns it without any request.
  std::optional<uint64_t> size_hint;

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
struct S3Options {
  // Endpoint URL, e.g. "https://s3.eu-west-1.amazonaws.com" or
  // "http://127.0.0.1:9000". Empty: $AWS_ENDPOINT_URL_S3, then
  // $AWS_ENDPOINT_URL, then https://s3.REGION.amazonaws.com.
  std::string endpoint;
  // Signing region. Empty: $AWS_REGION, then $AWS_DEFAULT_REGION, then
  // "us-east-1" (what the AWS tools default to for S3).
  std::string region;
  S3Addressing addressing = S3Addressing::kAuto;

  // Credentials, resolved when the source is opened, in this order:
  //  1. access_key_id + secret_access_key (+ session_token) set here;
  //  2. unless `profile` is set here: $AWS_ACCESS_KEY_ID and
  //     $AWS_SECRET_ACCESS_KEY (+ $AWS_SESSION_TOKEN);
  //  3. the shared credentials file ($AWS_SHARED_CREDENTIALS_FILE, else
  //     ~/.aws/credentials), section `profile`, else $AWS_PROFILE, else
  //     "default" (aws_access_key_id, aws_secret_access_key,
  //     aws_session_token).
  // None found is an error, unless `anonymous` (unsigned requests, for
  // public buckets). Secrets never appear in errors, logs or stats.
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  std::string profile;
  bool anonymous = false;

  Status Validate() const;
};

// The backend's own figures for one source, since it was opened.
struct HttpStats {
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
Result<std::shared_ptr<Source>> OpenHttpSource(const std::string& url,
                                               const HttpOptions& options = {});

// A source reading s3://bucket/key. The key may hold any character (spaces,
// '+', '=', '%', unicode, '/'): it is sent percent-encoded as S3 requires
// (RFC 3986 unreserved characters and '/' as they are, every other byte as
// %XX). InvalidArgument for a malformed URL or invalid options;
// PermissionDenied when no credentials are found (see S3Options). No I/O.
// Size() as for OpenHttpSource.
Result<std::shared_ptr<Source>> OpenS3Source(const std::string& s3_url,
                                             const S3Options& options = {},
                                             const HttpOptions& http = {});

// The backend stats of a source made by OpenHttpSource or OpenS3Source,
// also behind decorators (SourceWrapper: a BlockCache, ...);
// InvalidArgument for any other source.
Result<HttpStats> GetHttpStats(const Source& source);

}  // namespace rangeio
