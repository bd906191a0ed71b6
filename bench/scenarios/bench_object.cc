#include "bench_object.h"

#include <cerrno>
#include <cstdio>
#include <optional>
#include <utility>

#include "s3/s3.h"
#include "s3/s3_dialect.h"
#include "util/parse_text.h"

namespace rangeio::bench {

Result<BenchObject> BenchObject::Resolve(const std::string& url,
                                         const S3Options& s3) {
  BenchObject o;
  o.url_ = url;
  o.s3_options_ = s3;
  if (detail::StartsWithNoCase(url, "http://") ||
      detail::StartsWithNoCase(url, "https://")) {
    o.get_url_ = url;
    return o;
  }
  if (!detail::StartsWithNoCase(url, "s3://")) {
    return Status::InvalidArgument(
        "bench: '" + url + "' is not an http://, https:// or s3:// URL");
  }
  RANGEIO_ASSIGN_OR_RETURN(detail::S3Location loc,
                           detail::ParseS3Url("s3://" + url.substr(5)));
  const detail::EnvLookup env = detail::ProcessEnv;
  const std::string region = detail::ResolveS3Region(s3, env);
  RANGEIO_ASSIGN_OR_RETURN(
      detail::S3Endpoint endpoint,
      detail::ParseS3Endpoint(detail::ResolveS3EndpointUrl(s3, region, env)));
  RANGEIO_ASSIGN_OR_RETURN(std::optional<detail::S3Credentials> creds,
                           detail::ResolveS3Credentials(s3, env));
  o.region_ = region;
  o.creds_ = creds;
  auto dialect = std::make_shared<detail::S3Dialect>(
      region, creds.has_value() ? &*creds : nullptr);
  RANGEIO_RETURN_NOT_OK(dialect->Init());
  o.dialect_ = std::move(dialect);
  o.get_url_ = detail::S3ObjectUrl(
      endpoint, loc,
      detail::UseVirtualHosted(s3.addressing, endpoint, loc.bucket));
  return o;
}

Result<BenchObject> BenchObject::Sibling(const std::string& name) const {
  const size_t slash = url_.rfind('/');
  return Resolve(url_.substr(0, slash + 1) + name, s3_options_);
}

Result<std::shared_ptr<Source>> BenchObject::Open(
    const HttpOptions& http) const {
  if (!s3()) return OpenHttpSource(url_, http);
  return OpenS3Source(url_, s3_options_, http);
}

void BenchObject::Sign(CURL* easy) const {
  if (dialect_ != nullptr) dialect_->Configure(easy);
}

Status BenchObject::Put(const std::string& path) const {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"),
                                             &std::fclose);
  if (file == nullptr) {
    return Status::FromErrno(errno, "bench: opening '" + path + "' to upload");
  }
  (void)std::fseek(file.get(), 0, SEEK_END);
  const long size = std::ftell(file.get());
  std::rewind(file.get());
  std::unique_ptr<CURL, void (*)(CURL*)> easy(curl_easy_init(),
                                              &curl_easy_cleanup);
  if (easy == nullptr || size < 0) {
    return Status::Internal("bench: cannot set up the upload of '" + path +
                            "'");
  }
  curl_slist* headers = nullptr;
  const std::string sigv4 = "aws:amz:" + region_ + ":s3";
  CURL* e = easy.get();
  curl_easy_setopt(e, CURLOPT_URL, get_url_.c_str());
  curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
  curl_easy_setopt(e, CURLOPT_READDATA, file.get());
  curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(size));
  if (creds_.has_value()) {
    // The body is not hashed: every store this bench targets (RGW, s3rver,
    // S3) accepts an unsigned payload on a signed PUT.
    headers =
        curl_slist_append(headers, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    if (!creds_->session_token.empty()) {
      const std::string token =
          "x-amz-security-token: " + creds_->session_token;
      headers = curl_slist_append(headers, token.c_str());
    }
    curl_easy_setopt(e, CURLOPT_AWS_SIGV4, sigv4.c_str());
    curl_easy_setopt(e, CURLOPT_USERNAME, creds_->access_key_id.c_str());
    curl_easy_setopt(e, CURLOPT_PASSWORD, creds_->secret_access_key.c_str());
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
  }
  const CURLcode rc = curl_easy_perform(e);
  long code = 0;
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK || code / 100 != 2) {
    return Status::IoError("bench: uploading '" + path + "' to '" + url_ +
                           "': " +
                           (rc != CURLE_OK ? std::string(curl_easy_strerror(rc))
                                           : "HTTP " + std::to_string(code)));
  }
  return Status::OK();
}

}  // namespace rangeio::bench
