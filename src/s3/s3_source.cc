// s3_source.cc — OpenS3Source: resolves the object's URL, region, endpoint
// and credentials, and opens an HTTP source whose S3 dialect signs requests
// and reads S3 error bodies. Thread-safety: stateless; the source is as
// Source.
#include <memory>
#include <string>

#include "http/curl_engine.h"
#include "http/http_source.h"
#include "rangeio/http.h"
#include "s3/s3.h"
#include "s3/s3_dialect.h"
#include "util/redact.h"

namespace rangeio {

Status S3Options::Validate() const {
  if (region.find_first_of(": /") != std::string::npos || region.size() > 64 ||
      detail::HasControlChars(region)) {
    return Status::InvalidArgument("S3Options.region='" +
                                   detail::ForeignText(region) +
                                   "' is invalid: at most 64 characters, "
                                   "no ':', '/' or space");
  }
  return Status::OK();
}

Result<std::shared_ptr<Source>> OpenS3Source(const std::string& s3_url,
                                             const S3Options& options,
                                             const HttpOptions& http) {
  RANGEIO_RETURN_NOT_OK(options.Validate());
  RANGEIO_RETURN_NOT_OK(http.Validate());
  RANGEIO_ASSIGN_OR_RETURN(detail::S3Location loc, detail::ParseS3Url(s3_url));
  const detail::EnvLookup env = detail::ProcessEnv;
  const std::string region = detail::ResolveS3Region(options, env);
  if (region.find_first_of(": /") != std::string::npos || region.size() > 64 ||
      detail::HasControlChars(region)) {
    return Status::InvalidArgument("S3 region '" + detail::ForeignText(region) +
                                   "' for '" + detail::RedactUrl(s3_url) +
                                   "' is invalid");
  }
  const std::string endpoint_url =
      detail::ResolveS3EndpointUrl(options, region, env);
  auto endpoint = detail::ParseS3Endpoint(endpoint_url);
  if (!endpoint.ok())
    return endpoint.status().WithContext(detail::RedactUrl(s3_url));
  auto creds = detail::ResolveS3Credentials(options, env);
  if (!creds.ok()) {
    return creds.status().WithContext("credentials for " +
                                      detail::RedactUrl(s3_url));
  }
  if (!creds->has_value() && !options.anonymous) {
    return Status::PermissionDenied(
        "no AWS credentials for '" + detail::RedactUrl(s3_url) +
        "': set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile in the "
        "shared credentials file, or S3Options.anonymous for a public bucket");
  }
  RANGEIO_ASSIGN_OR_RETURN(auto engine, detail::CurlEngine::Shared());

  auto dialect = std::make_unique<detail::S3Dialect>(
      region, creds->has_value() ? &**creds : nullptr);
  RANGEIO_RETURN_NOT_OK(dialect->Init());
  auto target = std::make_shared<detail::HttpTarget>();
  const bool vhost =
      detail::UseVirtualHosted(options.addressing, *endpoint, loc.bucket);
  target->url = detail::S3ObjectUrl(*endpoint, loc, vhost);
  target->what = "GET " + target->url + " (bucket '" + loc.bucket + "', key '" +
                 loc.key + "')";
  target->name = "s3://" + loc.bucket + "/" + loc.key;
  target->describe =
      std::string(creds->has_value() ? "SigV4-signed" : "unsigned") +
      " S3 ranged GETs (region " + region + ", " +
      (vhost ? "virtual-hosted" : "path") + " style at " + endpoint->scheme +
      "://" + endpoint->authority + ")";
  // The endpoint's URL of the object and who asks for it: the key id, and
  // the secret and token only as a hash.
  target->identity =
      "s3 " + target->url + " " +
      detail::CacheIdentityOf(creds->has_value() ? &**creds : nullptr);
  target->options = http;
  if (http.size_hint) target->size = *http.size_hint;
  target->follow_redirects = false;  // a redirect would need a new signature
  target->path_as_is = true;         // keys may hold "./" or "../"
  target->dialect = std::move(dialect);
  // S3 throttles per bucket (and prefix): one limit per endpoint and bucket.
  const std::string limit_key =
      detail::EndpointOf(target->url) + " bucket " + loc.bucket;
  return detail::MakeHttpSource(std::move(engine), std::move(target),
                                limit_key);
}

}  // namespace rangeio
