#include "bench_object.h"

#include <optional>
#include <utility>

#include "parse_text.h"
#include "s3/s3.h"
#include "s3/s3_dialect.h"

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
  S3Options o = s3_options_;
  o.http = http;
  return OpenS3Source(url_, o);
}

void BenchObject::Sign(CURL* easy) const {
  if (dialect_ != nullptr) dialect_->Configure(easy);
}

}  // namespace rangeio::bench
