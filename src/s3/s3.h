// s3.h (internal) — the S3 parts of the S3 source that need no network:
// s3:// URL parsing, key encoding, endpoint and request URL construction,
// credential and region resolution, and the XML error body.
//
// Pure functions of their arguments (the environment is passed in as a
// lookup function), so the tests can cover every rule without a server.
// Thread-safety: stateless.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "rangeio/http.h"
#include "rangeio/status.h"

namespace rangeio::detail {

// Looks an environment variable up: nullopt when unset (empty counts as
// unset, as the AWS tools do).
using EnvLookup = std::function<std::optional<std::string>(const char*)>;
// The process environment.
std::optional<std::string> ProcessEnv(const char* name);

struct S3Location {
  std::string bucket;
  std::string key;  // verbatim: no percent-decoding
};

// "s3://bucket/key" -> bucket and key. The key is everything after the
// first '/' after the bucket, as it is (an s3:// URL is not percent-encoded,
// as for the AWS CLI). InvalidArgument naming the URL when malformed.
Result<S3Location> ParseS3Url(std::string_view url);

// The key as it goes into a request path: RFC 3986 unreserved characters
// (A-Z a-z 0-9 - _ . ~) and '/' as they are, every other byte as %XX with
// upper-case hex. This is also S3's SigV4 canonical URI of the key (S3 does
// not encode twice).
std::string EncodeS3Key(std::string_view key);

struct S3Endpoint {
  std::string scheme;     // "http" or "https"
  std::string authority;  // host[:port]
  std::string host;       // without the port
  bool aws = false;       // host ends with .amazonaws.com
};

// Parses "scheme://host[:port]" (a trailing '/' is allowed, any other path
// is not). InvalidArgument naming the endpoint when malformed.
Result<S3Endpoint> ParseS3Endpoint(std::string_view endpoint);

// Whether `style` resolves to virtual-hosted addressing for this bucket.
bool UseVirtualHosted(S3Addressing style, const S3Endpoint& endpoint,
                      std::string_view bucket);

// The GET URL of the object.
std::string S3ObjectUrl(const S3Endpoint& endpoint, const S3Location& loc,
                        bool virtual_hosted);

struct S3Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  std::string source;  // where they came from, for errors ("environment")
};

// Resolves the credentials as S3Options documents. nullopt when none are
// found; an error when a source is half-filled (a key id without a secret)
// or the credentials file cannot be parsed. Errors never hold a secret.
Result<std::optional<S3Credentials>> ResolveS3Credentials(
    const S3Options& options, const EnvLookup& env);

// Who `c` is, for a cache identity: the key id and a hash of the secret and
// token (never the secret itself); "anonymous" for null.
std::string CacheIdentityOf(const S3Credentials* c);

// Region and endpoint as S3Options documents.
std::string ResolveS3Region(const S3Options& options, const EnvLookup& env);
std::string ResolveS3EndpointUrl(const S3Options& options,
                                 const std::string& region,
                                 const EnvLookup& env);

// <Code>, <Message> and <ActualObjectSize> of an S3 XML error body; empty when
// absent. Tolerant: looks for the first element of each name, decodes the five
// predefined XML entities and numeric character references of ASCII.
struct S3ErrorBody {
  std::string code;
  std::string message;
  std::string actual_object_size;  // of an InvalidRange (416) error
};
S3ErrorBody ParseS3ErrorBody(std::string_view body);

}  // namespace rangeio::detail
