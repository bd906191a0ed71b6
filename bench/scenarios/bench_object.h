// bench_object.h — the object a network benchmark reads, given as an
// http(s):// URL or an s3:// URL (bench http, bench blob).
//
// An s3:// URL is resolved as OpenS3Source resolves it with default
// S3Options: endpoint, region and keys from the environment
// (AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, ...; docs/http-s3.md).
// The `direct` baselines then send plain libcurl GETs to the object's
// path-style URL, signed by libcurl (CURLOPT_AWS_SIGV4) as rangeio signs.
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
  // InvalidArgument naming `url` when it is neither http(s):// nor a valid
  // s3:// URL, or when an s3:// URL finds no credentials.
  static Result<BenchObject> Resolve(const std::string& url);

  bool s3() const { return s3_; }
  // The URL as given (for reports).
  const std::string& url() const { return url_; }
  // The same store's object `name` next to this one (same directory or key
  // prefix), e.g. Sibling("blob-3.bin").
  Result<BenchObject> Sibling(const std::string& name) const;

  // A rangeio source of the object.
  Result<std::shared_ptr<Source>> Open(const HttpOptions& http) const;
  // The plain GET URL, and the signing options for a libcurl handle
  // (nothing for http(s)://).
  const std::string& get_url() const { return get_url_; }
  void Sign(CURL* easy) const;

 private:
  BenchObject() = default;
  std::string url_;
  std::string get_url_;
  bool s3_ = false;
  std::string sigv4_;  // "aws:amz:REGION:s3"
  std::string key_id_;
  std::string secret_;
  struct FreeSlist {
    void operator()(curl_slist* l) const { curl_slist_free_all(l); }
  };
  // x-amz-content-sha256 and the session token, if any.
  std::unique_ptr<curl_slist, FreeSlist> headers_;
};

}  // namespace rangeio::bench
