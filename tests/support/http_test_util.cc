#include "support/http_test_util.h"

#include <chrono>

#include "s3/s3.h"
#include "support/collecting_sink.h"

namespace rangeio::testing {

const char* BackendName(HttpBackend backend) {
  switch (backend) {
    case HttpBackend::kNginx:
      return "nginx";
    case HttpBackend::kS3Path:
      return "s3_path";
    case HttpBackend::kS3Vhost:
      return "s3_vhost";
    case HttpBackend::kRgwPath:
      return "rgw_path";
    case HttpBackend::kRgwVhost:
      return "rgw_vhost";
  }
  return "unknown";
}

bool HasBackend(const TestServers& s, HttpBackend backend) {
  return !IsRgw(backend) || !s.rgw_endpoint.empty();
}

S3Options S3TestOptions(const TestServers& s, HttpBackend backend,
                        const std::string& endpoint) {
  S3Options o;
  o.region = "us-east-1";
  const bool rgw = IsRgw(backend);
  o.access_key_id = rgw ? s.rgw_access_key : kS3AccessKey;
  o.secret_access_key = rgw ? s.rgw_secret_key : kS3Secret;
  const std::string base =
      !endpoint.empty() ? endpoint : (rgw ? s.rgw_endpoint : s.s3_endpoint);
  if (backend == HttpBackend::kS3Vhost || backend == HttpBackend::kRgwVhost) {
    o.addressing = S3Addressing::kVirtualHosted;
    // BUCKET.s3.localhost:PORT reaches the proxy or the server on loopback
    // (RGW's `rgw dns name` is s3.localhost).
    const size_t colon = base.rfind(':');
    o.endpoint = "http://s3.localhost" + base.substr(colon);
  } else {
    o.addressing = S3Addressing::kPath;
    o.endpoint = base;
  }
  return o;
}

std::string UpstreamOf(const TestServers& s, HttpBackend backend) {
  if (backend == HttpBackend::kNginx) return s.NginxHostPort();
  return IsRgw(backend) ? s.RgwHostPort() : s.S3HostPort();
}

Result<std::shared_ptr<Source>> OpenTestObject(const TestServers& s,
                                               HttpBackend backend,
                                               const std::string& object,
                                               const HttpOptions& http,
                                               const std::string& proxy) {
  if (backend == HttpBackend::kNginx) {
    const std::string base = proxy.empty() ? s.nginx : proxy;
    return OpenHttpSource(base + "/" + detail::EncodeS3Key(object), http);
  }
  return OpenS3Source("s3://" + s.bucket + "/" + object,
                      S3TestOptions(s, backend, proxy), http);
}

HttpOptions FastOptions() {
  HttpOptions o;
  o.connect_timeout = std::chrono::milliseconds(2000);
  o.first_byte_timeout = std::chrono::milliseconds(5000);
  o.stall_timeout = std::chrono::milliseconds(5000);
  o.retry_base_backoff = std::chrono::milliseconds(5);
  o.retry_max_backoff = std::chrono::milliseconds(100);
  o.deadline = std::chrono::milliseconds(20'000);
  return o;
}

Result<Slice> ReadOnce(Source& source, ByteRange range) {
  CollectingSink sink;
  source.Read(range, &sink, 0);
  if (!sink.WaitFor(1, std::chrono::seconds(30))) {
    return Status::Internal("read of " + range.ToString() +
                            " did not complete within 30 s");
  }
  return sink.Get(0).bytes;
}

bool MatchesSeeded(ByteRange range, const Slice& bytes) {
  if (bytes.size() != range.length) return false;
  for (uint64_t i = 0; i < range.length; ++i) {
    if (bytes.data()[i] != SimulatedByteAt(range.offset + i)) return false;
  }
  return true;
}

}  // namespace rangeio::testing
