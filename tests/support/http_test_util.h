// tests/support/http_test_util.h — opening the seeded objects of the test
// servers as rangeio sources, and single reads.
//
// Thread-safety: free functions; thread-safe.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "rangeio/rangeio.h"
#include "support/http_servers.h"

namespace rangeio::testing {

enum class HttpBackend {
  kNginx,     // http://, nginx
  kS3Path,    // s3://, s3rver, path-style
  kS3Vhost,   // s3://, s3rver, virtual-hosted style (BUCKET.s3.localhost)
  kRgwPath,   // s3://, Ceph RGW, path-style
  kRgwVhost,  // s3://, Ceph RGW, virtual-hosted style (rgw dns name)
};

// For test names: nginx, s3_path, s3_vhost, rgw_path, rgw_vhost.
const char* BackendName(HttpBackend backend);
// For test names: Backends/Suite.Test/rgw_path.
inline std::string BackendParamName(
    const ::testing::TestParamInfo<HttpBackend>& p) {
  return BackendName(p.param);
}
// For gtest's messages (GetParam() = rgw_path).
inline void PrintTo(HttpBackend b, std::ostream* os) { *os << BackendName(b); }
inline bool IsRgw(HttpBackend b) {
  return b == HttpBackend::kRgwPath || b == HttpBackend::kRgwVhost;
}
// Whether the backend's server checks SigV4 signatures (s3rver does not).
inline bool VerifiesSignatures(HttpBackend b) { return IsRgw(b); }
// Whether the servers include `backend`'s (RGW is optional).
bool HasBackend(const TestServers& s, HttpBackend backend);

// s3rver's default credentials (it checks the key id, not the signature).
inline constexpr char kS3AccessKey[] = "S3RVER";
inline constexpr char kS3Secret[] = "S3RVER";

// S3Options for the S3 server of `backend` (s3rver or RGW, with its keys)
// at `endpoint` (default: the server's own) with the addressing of
// `backend`.
S3Options S3TestOptions(const TestServers& s, HttpBackend backend,
                        const std::string& endpoint = "");

// Opens `object` (a path under nginx's root, or a key of the bucket) on
// `backend`. With `proxy` (a ProxyListener's base URL) requests go through
// it; it must front the matching server (nginx, s3rver or RGW).
Result<std::shared_ptr<Source>> OpenTestObject(const TestServers& s,
                                               HttpBackend backend,
                                               const std::string& object,
                                               const HttpOptions& http = {},
                                               const std::string& proxy = "");

// The upstream (host:port) a proxy for `backend` fronts.
std::string UpstreamOf(const TestServers& s, HttpBackend backend);

// Short enough that a failing test fails fast, far above loopback latency.
HttpOptions FastOptions();

// One Source::Read, waited for (30 s hang guard).
Result<Slice> ReadOnce(Source& source, ByteRange range);

// Whether `bytes` are SimulatedByteAt over `range` (the seeded pattern).
bool MatchesSeeded(ByteRange range, const Slice& bytes);

// Every key the seed script uploads to each S3 store, holding pattern.bin
// (tests/servers/seed.js KEYS; keep the two in step).
inline constexpr const char* kSeededKeys[] = {
    "pattern.bin",
    "dir/sub/pattern.bin",
    "with space.bin",
    "plus+sign.bin",
    "eq=uals.bin",
    "per%cent.bin",
    "per%20cent.bin",
    "unicod\xc3\xa9 \xe2\x98\x83.bin",
    "mixed dir/a+b=c%d \xc3\xa9 \xe2\x98\x83 ~!*'()&$@,;:.bin",
    "dots/../up..bin",
    "q?a&b#c.bin",
    " lead and trail spaces.bin ",
    "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e/\xe3\x82\xad\xe3\x83\xbc.bin",
    "emoji \xf0\x9f\x98\x80\xf0\x9f\x9a\x80.bin",
};

}  // namespace rangeio::testing

// After RANGEIO_NEED_SERVERS(servers): skips the test (fails it under
// RANGEIO_REQUIRE_SERVERS=1) when `backend`'s server is not running.
#define RANGEIO_NEED_BACKEND(servers, backend)                                 \
  if (!::rangeio::testing::HasBackend(servers, backend)) {                     \
    if (::rangeio::testing::TestServers::Required()) {                         \
      FAIL() << "RANGEIO_REQUIRE_SERVERS=1 but Ceph RGW is not running "       \
                "(RANGEIO_TEST_RGW_ENDPOINT unset; install ceph-mon ceph-osd " \
                "radosgw ceph-common and restart the servers)";                \
    }                                                                          \
    GTEST_SKIP() << "Ceph RGW is not running: install ceph-mon ceph-osd "      \
                    "radosgw ceph-common, then restart run_servers.sh";        \
  }
