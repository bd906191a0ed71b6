#include "support/http_test_util.h"

#include <chrono>

#include "s3/s3.h"
#include "support/collecting_sink.h"

namespace rangeio::testing {

S3Options S3TestOptions(const TestServers& s, HttpBackend backend,
                        const HttpOptions& http, const std::string& endpoint) {
  S3Options o;
  o.http = http;
  o.region = "us-east-1";
  o.access_key_id = kS3AccessKey;
  o.secret_access_key = kS3Secret;
  if (backend == HttpBackend::kS3Vhost) {
    o.addressing = S3Addressing::kVirtualHosted;
    // BUCKET.s3.localhost:PORT reaches the proxy or s3rver on loopback.
    std::string base = endpoint.empty() ? s.s3_endpoint : endpoint;
    const size_t colon = base.rfind(':');
    o.endpoint = "http://s3.localhost" + base.substr(colon);
  } else {
    o.addressing = S3Addressing::kPath;
    o.endpoint = endpoint.empty() ? s.s3_endpoint : endpoint;
  }
  return o;
}

std::string UpstreamOf(const TestServers& s, HttpBackend backend) {
  return backend == HttpBackend::kNginx ? s.NginxHostPort() : s.S3HostPort();
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
                      S3TestOptions(s, backend, http, proxy));
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
