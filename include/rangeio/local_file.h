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
std::string_view LocalEngineName(LocalEngine engine);
// The inverse of LocalEngineName; InvalidArgument naming `name` and the
// valid names otherwise.
Result<LocalEngine> ParseLocalEngine(std::string_view name);

struct LocalFileOptions {
  // Reads this source runs at once: the threads of the pread pool, or the
  // queue depth of the io_uring ring. Valid 1..4096. Unset: 64, or the
  // limiter's io_concurrency through Reader::OpenUrl (more would sit idle).
  static constexpr uint32_t kDefaultThreads = 64;
  std::optional<uint32_t> threads;
  uint32_t ThreadsOrDefault() const { return threads.value_or(kDefaultThreads); }
  // Try each buffered read inline with preadv2(RWF_NOWAIT) first: a
  // page-cache hit then completes on the calling thread with no hand-off; a
  // miss (EAGAIN) goes to the pool or the ring. Never with `direct` (a
  // direct read has no cache to hit; it would block the caller), nor on a
  // thread driving the io_uring ring (its ring thread, or a waiting consumer:
  // its next io_uring_enter does the read for less).
  // On by default: hits gain much (bench hot-cache, row page-cache) and a
  // miss costs one failed preadv2 call, lost in the noise of cold reads
  // (bench local).
  bool try_inline = true;
  // The pread pool's helper threads that share page-cache hits with the
  // caller's thread (with try_inline, buffered): while reads keep hitting
  // the cache, each is queued instead of read inline, and the helpers and
  // any consumer that would otherwise wait for a result (Source::Assist)
  // take them a batch at a time; when most of a batch misses, reads go back
  // to the inline attempt first. Unset: one per core beyond the caller's, at
  // most `threads` (none on one core). 0: every hit inline on the thread that
  // issues it. Started when a batch waits and none is free; each polls
  // briefly, then sleeps, when there is nothing to run, and reads through its
  // own open file description of the file (one description's reference
  // count, shared by threads, costs a cache-line transfer per read). The
  // io_uring engine ignores it. Valid 0..4096.
  std::optional<uint32_t> hit_threads;
  // The engine. kAuto resolves to DefaultLocalEngine(direct). If the kernel
  // refuses a ring (EPERM under a seccomp filter or
  // kernel.io_uring_disabled, ENOSYS before Linux 5.1, ENOMEM under a tight
  // RLIMIT_MEMLOCK), kAuto reads the file with the pread pool instead and
  // Describe() says why; an explicit kUring fails to open, naming the cause.
  // Asking for io_uring never silently gives something slower.
  LocalEngine engine = LocalEngine::kAuto;
  // Open with O_DIRECT: reads bypass the page cache and go to the device in
  // buffers aligned to its direct-I/O alignment (statx STATX_DIOALIGN).
  // Each range is widened to aligned bounds, read whole, and handed back as
  // a sub-slice of that buffer (no copy); the buffer may hold up to two
  // alignment blocks more than the range, beyond the response budget's
  // count. With io_uring, reads of 64 KiB..1 MiB go into registered
  // buffers when one is free (pinned once instead of on every read, which
  // shows as bandwidth in bench local at 1 MiB): up to `threads` buffers of
  // 1 MiB, pinned while the file is open or a caller holds a slice of one.
  // Opening fails with InvalidArgument naming the file when its file system
  // does not support O_DIRECT. Default false: a buffered read that hits the
  // page cache never reaches the device, a direct read always does.
  bool direct = false;
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
Result<std::shared_ptr<Source>> OpenLocalFile(
    const std::string& path, const LocalFileOptions& options = {});

}  // namespace rangeio
