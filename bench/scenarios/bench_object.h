// bench_object.h — the object a network benchmark reads, given as an
// http(s):// URL or an s3:// URL (bench http, bench blob, bench url).
//
// An s3:// URL is resolved as OpenS3Source resolves it with the given
// S3Options: endpoint, region and keys from the options, else the
// environment (AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, ...;
// docs/http-s3.md), with no keys anywhere meaning unsigned requests. The
// `direct` baselines then send plain libcurl GETs to the same URL, signed by
// the library's own S3 dialect (CURLOPT_AWS_SIGV4), so both sides sign alike.
//
// Thread-safety: BenchObject is immutable once made; Sign may be called
// from several threads on different handles.
#pragma once

#include <curl/curl.h>

#include <memory>
#include <optional>
#include <string>

#include "rangeio/rangeio.h"
#include "s3/s3.h"

namespace rangeio::detail {
class S3Dialect;
}

namespace rangeio::bench {

class BenchObject {
 public:
  // InvalidArgument naming `url` when it is neither http(s):// nor a valid
  // s3:// URL, or when `s3` names a bad endpoint.
  static Result<BenchObject> Resolve(const std::string& url,
                                     const S3Options& s3 = {});

  bool s3() const { return dialect_ != nullptr; }
  // The URL as given (for reports).
  const std::string& url() const { return url_; }
  // The same store's object `name` next to this one (same directory or key
  // prefix), e.g. Sibling("blob-3.bin").
  Result<BenchObject> Sibling(const std::string& name) const;

  // A rangeio source of the object, with `http` for its transfers.
  Result<std::shared_ptr<Source>> Open(const HttpOptions& http) const;
  // The plain GET URL, and the signing options for a libcurl handle
  // (nothing for http(s)://).
  const std::string& get_url() const { return get_url_; }
  void Sign(CURL* easy) const;

  // Uploads the file at `path` as the object (one PUT, signed with
  // UNSIGNED-PAYLOAD for s3://), so a bench can serve data it made itself;
  // an IoError naming the URL and the store's answer otherwise.
  Status Put(const std::string& path) const;

 private:
  BenchObject() = default;
  std::string url_;
  std::string get_url_;
  std::string region_;
  S3Options s3_options_;
  std::optional<detail::S3Credentials> creds_;
  std::shared_ptr<const detail::S3Dialect> dialect_;  // null for http(s)
};

}  // namespace rangeio::bench
