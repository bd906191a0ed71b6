// rangeio/local_file.h — a Source over a local file: pread pool or io_uring.
//
// Two engines read local files: a pool of threads each blocking in one pread,
// and io_uring (one ring and one completion thread per open file). Buffered
// reads that hit the page cache may complete inline, on the thread that
// issues them (try_inline); O_DIRECT reads go to the device in aligned
// buffers. LocalFileOptions chooses; DefaultLocalEngine says which engine
// kAuto picks and why.
//
// Thread-safety: OpenLocalFile is reentrant; the source it returns may be
// read from any number of threads at once. The options are values.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "rangeio/export.h"
#include "rangeio/source.h"
#include "rangeio/status.h"

namespace rangeio {

// How a local file is read (LocalFileOptions::engine).
enum class LocalEngine {
  kAuto,   // the measured default (DefaultLocalEngine), falling back to the
           // pread pool when io_uring cannot be set up
  kPread,  // pread on a pool of blocking threads
  kUring,  // io_uring: one ring and one completion thread per open file
};

// "auto", "pread", "uring".
RANGEIO_EXPORT std::string_view LocalEngineName(LocalEngine engine);
// The inverse of LocalEngineName; InvalidArgument naming `name` and the
// valid names otherwise.
RANGEIO_EXPORT Result<LocalEngine> ParseLocalEngine(std::string_view name);

// How a local file is read. Every field's details and the measurements
// behind each default: docs/local-files.md and docs/options.md.
struct RANGEIO_EXPORT LocalFileOptions {
  // --- What most users set ---

  // Key "direct": open with O_DIRECT, reads going to the device in aligned
  // buffers (a range is a sub-slice of its aligned read, no copy). Opening
  // fails, naming the file, where its file system has no O_DIRECT.
  bool direct = false;
  // Key "local-engine" (auto, pread, uring). kAuto: DefaultLocalEngine, and
  // the pread pool, saying why in Info(), when the kernel refuses a ring;
  // an explicit kUring fails instead: never silently something slower.
  LocalEngine engine = LocalEngine::kAuto;

  // --- Most users should leave these alone ---

  // Key "local-threads": reads run at once, the pread pool's threads or the
  // ring's queue depth. Valid 1..4096. Unset: 64, or the limiter's
  // io_concurrency through Reader::OpenUrl (more would sit idle).
  static constexpr uint32_t kDefaultThreads = 64;
  std::optional<uint32_t> threads;
  uint32_t ThreadsOrDefault() const {
    return threads.value_or(kDefaultThreads);
  }
  // Key "try-inline": try each buffered read with preadv2(RWF_NOWAIT) on
  // the calling thread first, so a page-cache hit needs no hand-off (bench
  // hot-cache); a miss costs one failed call (bench local).
  bool try_inline = true;
  // Key "hit-threads": the pread pool's helpers that share page-cache hits
  // with the caller's thread. Unset: one per core beyond the caller's, at
  // most `threads`; 0: every hit inline. The io_uring engine ignores it.
  // Valid 0..4096.
  std::optional<uint32_t> hit_threads;
};

// The engine kAuto picks: io_uring for O_DIRECT files, the pread pool (with
// its inline preadv2 attempt and hit threads) for buffered ones. With
// O_DIRECT the ring does the same reads for less CPU (bench local, direct
// rows); buffered, 64 pool threads spread the page-cache miss work that one
// ring thread sets up alone (bench local, buffered rows), and page-cache hits
// are shared by the caller's thread and the hit threads (bench hot-cache).
constexpr LocalEngine DefaultLocalEngine(bool direct) {
  return direct ? LocalEngine::kUring : LocalEngine::kPread;
}

// A local file read by the engine `options` chooses. Fails before any read
// with NotFound / PermissionDenied / InvalidArgument (a directory, a bad
// option, O_DIRECT unsupported) naming `path`.
RANGEIO_EXPORT Result<std::shared_ptr<Source>> OpenLocalFile(
    const std::string& path, const LocalFileOptions& options = {});

}  // namespace rangeio
