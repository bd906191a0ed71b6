// tests/support/source_conformance.h — every Source backend, opened the same
// way, for the one conformance suite (source_conformance_test.cc).
//
// As in tensorstore's kvstore test_util: each backend is a factory that opens
// the same object, kConformanceBytes bytes whose byte i is SimulatedByteAt(i)
// (what the simulated store serves and what tests/servers/seed.js uploads as
// pattern.bin), so that one suite checks every backend against one contract.
// A backend that needs the HTTP test servers says so; the suite then skips it
// when they are absent, or fails under RANGEIO_REQUIRE_SERVERS=1
// (RANGEIO_NEED_SERVERS, support/http_servers.h).
//
// Thread-safety: the factories are thread-safe; each call opens a new source.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "rangeio/rangeio.h"
#include "support/http_test_util.h"

namespace rangeio::testing {

// Bytes of the conformance object: the servers' pattern.bin.
inline constexpr uint64_t kConformanceBytes = kPatternBytes;

// What a factory may need to open its object.
struct ConformanceEnv {
  // A local file of the conformance object (WriteConformanceFile).
  std::string local_path;
  // The running test servers; set only for backends with needs_servers.
  const TestServers* servers = nullptr;
};

// A source of the conformance object and the name it must report.
struct OpenedSource {
  std::shared_ptr<Source> source;
  std::string name;
};

struct SourceBackend {
  std::string id;  // test-name suffix: memory, pread_direct, s3, ...
  bool needs_servers = false;
  // Opens a new source of the conformance object. An InvalidArgument naming
  // O_DIRECT means the file system cannot do direct I/O (IsDirectUnsupported):
  // the suite skips the test.
  std::function<Result<OpenedSource>(const ConformanceEnv&)> open;
  // The server of a backend with needs_servers (RGW is optional to them).
  HttpBackend server = HttpBackend::kNginx;
};

// For test names and failure messages: the backend's id.
inline void PrintTo(const SourceBackend& b, std::ostream* os) { *os << b.id; }

// Every backend: memory (zero-copy and copying), simulated, block-cached
// over simulated, the local engines of local_conformance_test.cc (pread
// pool and io_uring: buffered, inline attempt, hit helpers, O_DIRECT), HTTP
// (nginx) and S3 (s3rver and Ceph RGW, path-style).
std::vector<SourceBackend> ConformanceBackends();

// Writes the conformance object to `path`.
Status WriteConformanceFile(const std::string& path);

// Whether `status` is a local open refused for lack of O_DIRECT support
// (tmpfs before Linux 6.6, ...): the test is skipped, not failed.
bool IsDirectUnsupported(const Status& status);

}  // namespace rangeio::testing
