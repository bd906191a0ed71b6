// bench_object.h — the object a network benchmark reads, given as an
// http(s):// URL or an s3:// URL (bench http, blob, vindex and url).
//
// rangeio reads it through the public API (OpenHttpSource, OpenS3Source with
// the given S3Options). The `direct` baselines send plain libcurl requests
// to the same object, signed by libcurl's own SigV4 (CURLOPT_AWS_SIGV4) with
// what Resolve finds here, in the order S3Options documents: endpoint,
// region and keys from the options, else $AWS_ENDPOINT_URL_S3,
// $AWS_ENDPOINT_URL (else https://s3.REGION.amazonaws.com), $AWS_REGION,
// $AWS_DEFAULT_REGION (else us-east-1), $AWS_ACCESS_KEY_ID and
// $AWS_SECRET_ACCESS_KEY (+ $AWS_SESSION_TOKEN); no keys: unsigned. Keys
// kept only in the shared credentials file sign rangeio's requests, not the
// baseline's (give them in the environment to compare).
//
// Thread-safety: BenchObject is immutable once made; Sign may be called
// from several threads on different handles.
#pragma once

#include <curl/curl.h>

#include <memory>
#include <string>

#include "rangeio/rangeio.h"

namespace rangeio::bench {

class BenchObject {
 public:
  // InvalidArgument naming `url` when it is neither http(s):// nor an
  // s3://bucket/key URL, or when the endpoint is not http(s)://host[:port].
  static Result<BenchObject> Resolve(const std::string& url,
                                     const S3Options& s3 = {});

  bool s3() const { return s3_; }
  // The URL as given (for reports).
  const std::string& url() const { return url_; }
  // The same store's object `name` next to this one (same directory or key
  // prefix), e.g. Sibling("blob-3.bin").
  Result<BenchObject> Sibling(const std::string& name) const;

  // A rangeio source of the object, with `http` for its transfers.
  Result<std::shared_ptr<Source>> Open(const HttpOptions& http) const;
  // The plain GET URL, and the signing options for a libcurl handle
  // (nothing for http(s):// or without keys).
  const std::string& get_url() const { return get_url_; }
  void Sign(CURL* easy) const;

  // Uploads the file at `path` as the object (one PUT, signed with
  // UNSIGNED-PAYLOAD for s3://), so a bench can serve data it made itself;
  // an IoError naming the URL and the store's answer otherwise.
  Status Put(const std::string& path) const;

 private:
  struct Signing;  // libcurl's SigV4 settings (bench_object.cc)
  // The keys of `s3`, else of the environment; null when there are none.
  static Result<std::shared_ptr<const Signing>> MakeSigning(
      const S3Options& s3, const std::string& region);
  BenchObject() = default;
  std::string url_;
  std::string get_url_;
  bool s3_ = false;
  S3Options s3_options_;
  std::shared_ptr<const Signing> signing_;  // null: unsigned
};

}  // namespace rangeio::bench
