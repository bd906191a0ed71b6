#include "bench_object.h"

#include <utility>

#include "s3/s3.h"

namespace rangeio::bench {
namespace {

// SHA-256 of the empty payload, which a GET signs (as s3_dialect.cc).
constexpr char kEmptySha256[] =
    "x-amz-content-sha256: "
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

}  // namespace

Result<BenchObject> BenchObject::Resolve(const std::string& url) {
  BenchObject o;
  o.url_ = url;
  if (url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0) {
    o.get_url_ = url;
    return o;
  }
  if (url.rfind("s3://", 0) != 0) {
    return Status::InvalidArgument(
        "bench: '" + url + "' is not an http://, https:// or s3:// URL");
  }
  RANGEIO_ASSIGN_OR_RETURN(detail::S3Location loc, detail::ParseS3Url(url));
  const S3Options defaults;
  const std::string region =
      detail::ResolveS3Region(defaults, detail::ProcessEnv);
  RANGEIO_ASSIGN_OR_RETURN(detail::S3Endpoint endpoint,
                           detail::ParseS3Endpoint(detail::ResolveS3EndpointUrl(
                               defaults, region, detail::ProcessEnv)));
  RANGEIO_ASSIGN_OR_RETURN(
      std::optional<detail::S3Credentials> creds,
      detail::ResolveS3Credentials(defaults, detail::ProcessEnv));
  if (!creds) {
    return Status::InvalidArgument(
        "bench: no S3 credentials for '" + url +
        "': set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
  }
  o.s3_ = true;
  o.get_url_ = detail::S3ObjectUrl(endpoint, loc, false);
  o.sigv4_ = "aws:amz:" + region + ":s3";
  o.key_id_ = creds->access_key_id;
  o.secret_ = creds->secret_access_key;
  curl_slist* headers = curl_slist_append(nullptr, kEmptySha256);
  if (headers != nullptr && !creds->session_token.empty()) {
    const std::string token = "x-amz-security-token: " + creds->session_token;
    curl_slist* more = curl_slist_append(headers, token.c_str());
    if (more == nullptr) curl_slist_free_all(headers);
    headers = more;
  }
  if (headers == nullptr) return Status::Internal("curl_slist_append failed");
  o.headers_.reset(headers);
  return o;
}

Result<BenchObject> BenchObject::Sibling(const std::string& name) const {
  const size_t slash = url_.rfind('/');
  return Resolve(url_.substr(0, slash + 1) + name);
}

Result<std::shared_ptr<Source>> BenchObject::Open(
    const HttpOptions& http) const {
  if (!s3_) return OpenHttpSource(url_, http);
  S3Options o;
  o.http = http;
  o.addressing = S3Addressing::kPath;  // as the direct baseline's GETs
  return OpenS3Source(url_, o);
}

void BenchObject::Sign(CURL* easy) const {
  if (!s3_) return;
  curl_easy_setopt(easy, CURLOPT_AWS_SIGV4, sigv4_.c_str());
  curl_easy_setopt(easy, CURLOPT_USERNAME, key_id_.c_str());
  curl_easy_setopt(easy, CURLOPT_PASSWORD, secret_.c_str());
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers_.get());
}

}  // namespace rangeio::bench
