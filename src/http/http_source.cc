// http_source.cc — the Source over an HttpTarget (HTTP(S), and S3 through
// its dialect): option checks, URL redaction at open, Size() discovery, and
// reads handed to the shared curl event loop. Thread-safety: as Source.
#include "http/http_source.h"

#include <functional>
#include <string>

#include "rangeio/http.h"
#include "util/buffer_pool.h"
#include "util/clock.h"
#include "util/mutex.h"
#include "util/parse_text.h"
#include "util/redact.h"

namespace rangeio {
namespace {

Status CheckMillis(const char* field, std::chrono::milliseconds v,
                   int64_t min_ms, int64_t max_ms) {
  if (v.count() >= min_ms && v.count() <= max_ms) return Status::OK();
  return Status::InvalidArgument(
      std::string("HttpOptions.") + field + "=" + std::to_string(v.count()) +
      " ms is invalid: valid " + std::to_string(min_ms) + ".." +
      std::to_string(max_ms) + " ms");
}

// Blocks Size() until its probe completes.
class ProbeSink final : public ReadSink {
 public:
  void OnReadDone(uint64_t /*tag*/, Result<Slice> bytes) override
      EXCLUDES(mu_) {
    detail::MutexLock lk(mu_);
    status_ = bytes.status();
    done_ = true;
    cv_.NotifyAll();  // under the lock: the waiter may destroy this next
  }
  Status Wait() EXCLUDES(mu_) {
    detail::MutexLock lk(mu_);
    while (!done_) cv_.Wait(lk);
    return status_;
  }

 private:
  detail::Mutex mu_;
  detail::CondVar cv_;
  bool done_ GUARDED_BY(mu_) = false;
  Status status_ GUARDED_BY(mu_);
};

class HttpSource final : public Source {
 public:
  HttpSource(std::shared_ptr<detail::CurlEngine> engine,
             std::shared_ptr<detail::HttpTarget> target)
      : engine_(std::move(engine)), target_(std::move(target)) {
    engine_->Register(target_->options.max_connections);
  }
  ~HttpSource() override {
    engine_->Unregister(target_->options.max_connections);
  }

  const std::string& name() const override { return target_->name; }

  Result<uint64_t> Size() override EXCLUDES(probe_mu_) {
    uint64_t size = target_->size.load();
    if (size != detail::HttpTarget::kUnknownSize) return size;
    if (engine_->OnLoopThread()) {
      return Status::InvalidArgument(
          "size of '" + name() +
          "' asked on the HTTP event-loop thread (from a read's completion) "
          "before it is known; a request now would deadlock: give "
          "HttpOptions.size_hint or call Size() beforehand");
    }
    detail::MutexLock lk(probe_mu_);  // one probe at a time
    size = target_->size.load();
    if (size != detail::HttpTarget::kUnknownSize) return size;
    ProbeSink sink;
    std::byte* dst = nullptr;
    Slice buffer = Slice::Allocate(1, &dst);
    target_->stats.Update([](HttpStats& s) { ++s.size_probes; });
    engine_->Submit(target_, ByteRange{0, 1}, std::move(buffer), dst, &sink, 0,
                    /*size_probe=*/true);
    Status st = sink.Wait();
    if (!st.ok()) return st.WithContext("size of '" + name() + "'");
    size = target_->size.load();
    if (size == detail::HttpTarget::kUnknownSize) {
      return Status::IoError("size of '" + name() +
                             "': the answer to bytes=0-0 did not give the "
                             "total size (Content-Range total '*')");
    }
    return size;
  }

  void Read(ByteRange range, ReadSink* sink, uint64_t tag) override {
    if (range.length == 0) {
      sink->OnReadDone(tag, Slice());
      return;
    }
    std::byte* dst = nullptr;
    // The length may come from a peer's Content-Range total: a refused
    // allocation is this read's error, not an exception.
    Result<Slice> buffer = detail::TryAllocateSlice(
        range.length, &dst, target_->what + " " + range.ToString());
    if (!buffer.ok()) {
      sink->OnReadDone(tag, buffer.status());
      return;
    }
    engine_->Submit(target_, range, std::move(*buffer), dst, sink, tag);
  }

  SourceInfo Info() const override {
    return {target_->identity, PlannerOptions::None(),
            target_->describe + ", up to " +
                std::to_string(target_->options.max_connections) +
                " connections (libcurl)"};
  }

  void Cancel(ReadSink* sink, uint64_t tag) override {
    engine_->Cancel(sink, tag);
  }

  HttpStats stats() const {
    HttpStats s = target_->stats.Snapshot();
    if (const auto& e = target_->endpoint) {
      const detail::EndpointLimit::Snapshot l = e->Get(detail::NowNanos());
      s.endpoint_limit = l.limit;
      s.endpoint_min_limit = l.min_limit;
      s.endpoint_throttles = l.throttles;
      s.endpoint_throttled_ns = l.throttled_ns;
    }
    return s;
  }

 private:
  const std::shared_ptr<detail::CurlEngine> engine_;
  const std::shared_ptr<detail::HttpTarget> target_;
  // Held through a probe, so concurrent Size() calls send one; guards no
  // data (the size itself is an atomic in the target).
  detail::Mutex probe_mu_;
};

// `url` without its user:password or signing query values (RedactUrl):
// what errors and name() may show. Checks the URL with libcurl's own parser,
// so what is accepted here is what it sends.
Result<std::string> RedactedHttpUrl(const std::string& url) {
  if (!detail::StartsWithNoCase(url, "http://") &&
      !detail::StartsWithNoCase(url, "https://")) {
    return Status::InvalidArgument("'" + detail::RedactUrl(url) +
                                   "' is not an http:// or https:// URL");
  }
  CURLU* u = curl_url();
  if (u == nullptr) return Status::Internal("curl_url failed");
  std::string out;
  CURLUcode rc = curl_url_set(u, CURLUPART_URL, url.c_str(), 0);
  if (rc == CURLUE_OK) rc = curl_url_set(u, CURLUPART_USER, nullptr, 0);
  if (rc == CURLUE_OK) rc = curl_url_set(u, CURLUPART_PASSWORD, nullptr, 0);
  char* text = nullptr;
  if (rc == CURLUE_OK) rc = curl_url_get(u, CURLUPART_URL, &text, 0);
  if (rc == CURLUE_OK) out = detail::RedactUrl(text);
  curl_free(text);
  curl_url_cleanup(u);
  if (rc != CURLUE_OK) {
    // The URL may hold a password: say what is wrong, not the URL.
    return Status::InvalidArgument(std::string("malformed http(s) URL: ") +
                                   curl_url_strerror(rc));
  }
  return out;
}

}  // namespace

namespace detail {

std::shared_ptr<Source> MakeHttpSource(std::shared_ptr<CurlEngine> engine,
                                       std::shared_ptr<HttpTarget> target,
                                       const std::string& endpoint) {
  if (target->options.adaptive) {
    target->endpoint =
        EndpointLimit::Shared(endpoint, target->options.max_connections);
  }
  return std::make_shared<HttpSource>(std::move(engine), std::move(target));
}

std::string EndpointOf(const std::string& url) {
  CURLU* u = curl_url();
  if (u == nullptr) return url;
  std::string out = url;
  char* scheme = nullptr;
  char* host = nullptr;
  char* port = nullptr;
  if (curl_url_set(u, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK &&
      curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
      curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
      curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK) {
    out = std::string(scheme) + "://" + host + ":" + port;
  }
  curl_free(scheme);
  curl_free(host);
  curl_free(port);
  curl_url_cleanup(u);
  return out;
}

}  // namespace detail

Status HttpOptions::Validate() const {
  constexpr int64_t kDay = 86'400'000;
  RANGEIO_RETURN_NOT_OK(
      CheckMillis("connect_timeout", connect_timeout, 1, kDay));
  RANGEIO_RETURN_NOT_OK(
      CheckMillis("first_byte_timeout", first_byte_timeout, 1, kDay));
  RANGEIO_RETURN_NOT_OK(CheckMillis("stall_timeout", stall_timeout, 1, kDay));
  RANGEIO_RETURN_NOT_OK(
      CheckMillis("retry_base_backoff", retry_base_backoff, 0, kDay));
  RANGEIO_RETURN_NOT_OK(CheckMillis("retry_max_backoff", retry_max_backoff,
                                    retry_base_backoff.count(), kDay));
  RANGEIO_RETURN_NOT_OK(CheckMillis("deadline", deadline, 1, kDay));
  if (min_bytes_per_second > (uint64_t{1} << 40)) {
    return Status::InvalidArgument("HttpOptions.min_bytes_per_second=" +
                                   std::to_string(min_bytes_per_second) +
                                   " is invalid: valid 0..2^40");
  }
  if (size_hint && *size_hint == detail::HttpTarget::kUnknownSize) {
    return Status::InvalidArgument(
        "HttpOptions.size_hint=" + std::to_string(*size_hint) +
        " is invalid: valid 0..2^64-2");
  }
  if (max_attempts < 1 || max_attempts > 100) {
    return Status::InvalidArgument(
        "HttpOptions.max_attempts=" + std::to_string(max_attempts) +
        " is invalid: valid 1..100");
  }
  if (max_connections < 1 || max_connections > 4096) {
    return Status::InvalidArgument(
        "HttpOptions.max_connections=" + std::to_string(max_connections) +
        " is invalid: valid 1..4096");
  }
  return Status::OK();
}

std::string HttpStats::ToString() const {
  auto ms = [](uint64_t ns) {
    return std::to_string(static_cast<double>(ns) / 1e6) + " ms";
  };
  return "gets: " + std::to_string(gets) + "\nheads: " + std::to_string(heads) +
         "\nsize_probes: " + std::to_string(size_probes) +
         "\nreads_ok: " + std::to_string(reads_ok) +
         "\nreads_failed: " + std::to_string(reads_failed) +
         "\nbytes: " + std::to_string(bytes) +
         "\nhttp2_responses: " + std::to_string(http2_responses) +
         "\nretries_5xx: " + std::to_string(retries_5xx) +
         "\nretries_throttled: " + std::to_string(retries_throttled) +
         "\nretries_connection: " + std::to_string(retries_connection) +
         "\nretries_timeout: " + std::to_string(retries_timeout) +
         "\nthrottled: " + std::to_string(throttled) +
         "\nendpoint_limit: " + std::to_string(endpoint_limit) +
         "\nendpoint_min_limit: " + std::to_string(endpoint_min_limit) +
         "\nendpoint_throttles: " + std::to_string(endpoint_throttles) +
         "\nendpoint_throttled: " + ms(endpoint_throttled_ns) +
         "\nttfb_p50: " + ms(time_to_first_byte.Percentile(0.5)) +
         "\nttfb_p99: " + ms(time_to_first_byte.Percentile(0.99)) +
         "\nlatency_p50: " + ms(latency.Percentile(0.5)) +
         "\nlatency_p99: " + ms(latency.Percentile(0.99)) + "\n";
}

Result<std::shared_ptr<Source>> OpenHttpSource(const std::string& url,
                                               const HttpOptions& options) {
  RANGEIO_RETURN_NOT_OK(options.Validate());
  RANGEIO_ASSIGN_OR_RETURN(auto engine, detail::CurlEngine::Shared());
  RANGEIO_ASSIGN_OR_RETURN(std::string name, RedactedHttpUrl(url));
  auto target = std::make_shared<detail::HttpTarget>();
  target->url = url;
  // The URL as sent, user:password included, hashed: other credentials
  // are another identity, and no secret is kept in the clear.
  target->identity =
      "http " + name + " " + std::to_string(std::hash<std::string>{}(url));
  target->what = "GET " + name;
  target->describe = "ranged GETs over HTTP";
  target->name = std::move(name);
  target->options = options;
  if (options.size_hint) target->size = *options.size_hint;
  const std::string endpoint = detail::EndpointOf(url);
  return detail::MakeHttpSource(std::move(engine), std::move(target), endpoint);
}

Result<HttpStats> GetHttpStats(const Source& source) {
  const Source* s = &source;
  while (const auto* w = dynamic_cast<const SourceWrapper*>(s)) {
    s = w->target().get();
  }
  const auto* http = dynamic_cast<const HttpSource*>(s);
  if (http == nullptr) {
    return Status::InvalidArgument("'" + source.name() +
                                   "' is not an HTTP or S3 source");
  }
  return http->stats();
}

}  // namespace rangeio
