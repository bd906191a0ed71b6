#include "support/source_conformance.h"

#include <chrono>
#include <optional>
#include <utility>
#include <vector>

#include "support/http_test_util.h"
#include "support/test_util.h"

namespace rangeio::testing {
namespace {

Slice ConformanceBytes() {
  auto buf = std::make_shared<std::vector<std::byte>>(kConformanceBytes);
  FillSimulatedBytes(0, *buf);
  const std::byte* data = buf->data();
  return Slice(std::shared_ptr<const void>(buf), data, kConformanceBytes);
}

// Out-of-order completions: every 5th read is ten times slower, so that
// as-completed delivery differs from request order.
LatencyModel SimModel() {
  return LatencyModel::EveryKth(std::chrono::microseconds(100),
                                std::chrono::milliseconds(1), 5);
}

Result<OpenedSource> OpenMemory(bool zero_copy) {
  std::string name = zero_copy ? "mem://conformance" : "mem-copy://conformance";
  return OpenedSource{MakeMemorySource(name, ConformanceBytes(), zero_copy),
                      name};
}

Result<OpenedSource> OpenSim() {
  const std::string name = "sim://bucket/conformance";
  RANGEIO_ASSIGN_OR_RETURN(
      auto source, MakeSimulatedSource(name, kConformanceBytes, SimModel()));
  return OpenedSource{std::move(source), name};
}

// A cache of its own per source, with small blocks so that ranges span
// several and the cache's own block reads are many.
Result<OpenedSource> OpenCached() {
  RANGEIO_ASSIGN_OR_RETURN(OpenedSource inner, OpenSim());
  BlockCacheOptions o;
  o.block_bytes = 16 << 10;
  o.capacity_bytes = 4 << 20;
  o.max_cached_read_bytes = 2 << 20;
  RANGEIO_ASSIGN_OR_RETURN(auto cache, BlockCache::Make(o));
  RANGEIO_ASSIGN_OR_RETURN(auto source,
                           MakeCachedSource(inner.source, std::move(cache)));
  return OpenedSource{std::move(source), inner.name};
}

// Three threads (or a queue depth of three): fewer than most tests' C, so
// that reads also wait in the source's own queue.
Result<OpenedSource> OpenLocal(const ConformanceEnv& env, LocalFileOptions o) {
  o.threads = 3;
  RANGEIO_ASSIGN_OR_RETURN(auto source, OpenLocalFile(env.local_path, o));
  return OpenedSource{std::move(source), env.local_path};
}

Result<OpenedSource> OpenServer(const ConformanceEnv& env,
                                HttpBackend backend) {
  HttpOptions o;
  o.deadline = std::chrono::seconds(20);  // a hang guard, never reached
  RANGEIO_ASSIGN_OR_RETURN(
      auto source, OpenTestObject(*env.servers, backend, "pattern.bin", o));
  std::string name = source->name();
  return OpenedSource{std::move(source), std::move(name)};
}

// As local_conformance_test.cc's engines: hit_threads unset is the default.
SourceBackend Local(std::string id, LocalEngine engine, bool direct,
                    bool try_inline,
                    std::optional<uint32_t> hit_threads = std::nullopt) {
  LocalFileOptions o;
  o.engine = engine;
  o.direct = direct;
  o.try_inline = try_inline;
  o.hit_threads = hit_threads;
  return {std::move(id), false,
          [=](const ConformanceEnv& env) { return OpenLocal(env, o); }};
}

SourceBackend Server(std::string id, HttpBackend backend) {
  return {std::move(id), true,
          [=](const ConformanceEnv& env) { return OpenServer(env, backend); },
          backend};
}

}  // namespace

std::vector<SourceBackend> ConformanceBackends() {
  return {
      {"memory", false, [](const auto&) { return OpenMemory(true); }},
      {"memory_copying", false, [](const auto&) { return OpenMemory(false); }},
      {"simulated", false, [](const auto&) { return OpenSim(); }},
      {"cached", false, [](const auto&) { return OpenCached(); }},
      Local("pread", LocalEngine::kPread, false, false),
      Local("pread_inline", LocalEngine::kPread, false, true, 0),
      Local("pread_hits", LocalEngine::kPread, false, true, 2),
      Local("pread_direct", LocalEngine::kPread, true, false),
      Local("uring", LocalEngine::kUring, false, false),
      Local("uring_inline", LocalEngine::kUring, false, true),
      Local("uring_direct", LocalEngine::kUring, true, false),
      Server("http", HttpBackend::kNginx),
      Server("s3", HttpBackend::kS3Path),
      Server("rgw", HttpBackend::kRgwPath),
  };
}

Status WriteConformanceFile(const std::string& path) {
  return WriteFileBytes(path, ConformanceBytes());
}

bool IsDirectUnsupported(const Status& status) {
  return status.code() == StatusCode::kInvalidArgument &&
         status.message().find("O_DIRECT") != std::string::npos;
}

}  // namespace rangeio::testing
