// tests/support/http_test_util.h — opening the seeded objects of the test
// servers as rangeio sources, and single reads.
//
// Thread-safety: free functions; thread-safe.
#pragma once

#include <string>

#include "rangeio/rangeio.h"
#include "support/http_servers.h"

namespace rangeio::testing {

enum class HttpBackend {
  kNginx,    // http://, nginx
  kS3Path,   // s3://, s3rver, path-style
  kS3Vhost,  // s3://, s3rver, virtual-hosted style (BUCKET.s3.localhost)
};

// s3rver's default credentials (it checks the key id, not the signature).
inline constexpr char kS3AccessKey[] = "S3RVER";
inline constexpr char kS3Secret[] = "S3RVER";

// S3Options for s3rver at `endpoint` (default: the servers' own) with
// `http` options and the addressing of `backend`.
S3Options S3TestOptions(const TestServers& s, HttpBackend backend,
                        const HttpOptions& http = {},
                        const std::string& endpoint = "");

// Opens `object` (a path under nginx's root, or a key of the bucket) on
// `backend`. With `proxy` (a ProxyListener's base URL) requests go through
// it; it must front the matching server (nginx or s3rver).
Result<std::shared_ptr<Source>> OpenTestObject(const TestServers& s,
                                               HttpBackend backend,
                                               const std::string& object,
                                               const HttpOptions& http = {},
                                               const std::string& proxy = "");

// The upstream (host:port) a proxy for `backend` fronts.
std::string UpstreamOf(const TestServers& s, HttpBackend backend);

// One Source::Read, waited for (30 s hang guard).
Result<Slice> ReadOnce(Source& source, ByteRange range);

// Whether `bytes` are SimulatedByteAt over `range` (the seeded pattern).
bool MatchesSeeded(ByteRange range, const Slice& bytes);

}  // namespace rangeio::testing
