// rangeio/source.h — one readable object, read asynchronously.
//
// A Source is a file, an object in a store, or bytes in memory, with a known
// or discoverable size. The scheduler calls Read(); the backend completes it
// by calling the sink exactly once, from any thread, possibly before Read()
// returns (memory, page-cache hits: the fast path, not a special case). A
// backend never blocks the caller of Read() on I/O: it owns whatever threads
// it needs (a pread pool, an io_uring completion thread, a timer thread, ...).
//
// Thread-safety: every method may be called concurrently from any thread.
// Lifetime: a Source outlives every Read it accepted (the scheduler holds a
// shared_ptr to it while reads are in flight).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rangeio/byte_range.h"
#include "rangeio/planner.h"
#include "rangeio/slice.h"
#include "rangeio/status.h"

namespace rangeio {

// One finished read, as a batch hands it over (ReadSink::OnReadsDone).
struct ReadCompletion {
  uint64_t tag = 0;
  Result<Slice> bytes = Slice();
};

// One read of a batch (Source::ReadMany).
struct ReadRequest {
  ByteRange range;
  uint64_t tag = 0;
};

// Receives completions. `tag` is the value passed to Source::Read.
class ReadSink {
 public:
  // On success `bytes` holds exactly the requested length (the Reader turns
  // any other length into an IoError, never short data). On failure the
  // Status gives the backend cause (errno text, ...); the Reader prefixes
  // the range, its request index and the source's name.
  virtual void OnReadDone(uint64_t tag, Result<Slice> bytes) = 0;

  // Several reads of this sink finished together, on one thread: the same
  // as OnReadDone for each, in order (the default does just that), but a
  // sink that takes locks per completion takes them once for the batch. A
  // backend that finishes reads in bursts (cache hits run by a helper
  // thread) calls this; `done` may be modified by the sink.
  virtual void OnReadsDone(std::span<ReadCompletion> done) {
    for (ReadCompletion& c : done) OnReadDone(c.tag, std::move(c.bytes));
  }

 protected:
  ~ReadSink() = default;
};

class Source {
 public:
  Source() = default;
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;
  virtual ~Source() = default;

  // What errors call this source: a path, a URL, a name given by the user.
  virtual const std::string& name() const = 0;

  // Size in bytes. May do I/O the first time (a stat, a request); cached.
  virtual Result<uint64_t> Size() = 0;

  // Starts reading `range`, which the caller has checked against Size().
  // Calls sink->OnReadDone(tag, ...) exactly once. A zero-length range
  // completes with an empty Slice. Never throws, never blocks on I/O.
  virtual void Read(ByteRange range, ReadSink* sink, uint64_t tag) = 0;

  // Starts several reads for one sink: the same as Read for each, in order
  // (the default does just that), but a backend that queues reads for its
  // own threads queues them under one lock. The Reader issues the reads
  // each admission grants with one call.
  virtual void ReadMany(std::span<const ReadRequest> reads, ReadSink* sink) {
    for (const ReadRequest& r : reads) Read(r.range, sink, r.tag);
  }

  // How a Reader plans reads of this source unless Options::planner says
  // otherwise: the preset that suits the storage behind it. The default,
  // PlannerOptions::None(), reads each range as requested.
  virtual PlannerOptions DefaultPlannerOptions() const {
    return PlannerOptions::None();
  }

  // Hands out, at once and with no I/O, the ranges this source already holds
  // in memory (a cache in front of it): sets (*out)[i] for each range i it
  // can serve and returns how many it set. `out` is empty on entry; a source
  // that serves any range resizes it to ranges.size() first. The ranges are
  // valid (within Size()). The Reader calls it
  // before admitting any read, so such a range takes no permit and no
  // response budget. Thread-safe. The default serves nothing.
  virtual size_t ReadCached(std::span<const ByteRange> ranges,
                            std::vector<std::optional<Slice>>* out) {
    (void)ranges;
    (void)out;
    return 0;
  }

  // Runs, on the calling thread, up to `max_reads` reads this source has
  // queued for its own threads and can finish without blocking (page-cache
  // hits waiting for a helper thread), completing them as usual; returns
  // how many it ran. A Reader's consumer calls it when it has no result to
  // take and would otherwise wait: the waiting thread does the work instead
  // of idling while the source's threads do it. Never blocks on I/O.
  // Thread-safe. The default runs nothing.
  virtual size_t Assist(size_t max_reads) {
    (void)max_reads;
    return 0;
  }

  // One line for people and logs: which backend serves this source, how it
  // is set up, and why when it is not the one that was asked for (e.g.
  // "pread pool, up to 64 threads, buffered; io_uring unavailable: ...").
  // May include running counters. The default says nothing (empty).
  virtual std::string Describe() const { return {}; }
};

// --- Backends -------------------------------------------------------------

// Bytes in memory. `data` is shared, never copied at construction. With
// zero_copy, reads complete inline with Slices of `data` itself; without it,
// each read copies its bytes into a new buffer (what a backend that owns its
// buffers costs, and the baseline for the zero-copy path).
std::shared_ptr<Source> MakeMemorySource(std::string name, Slice data,
                                         bool zero_copy = true);

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
  // Reads this source runs at once: the threads of the pread pool (each
  // blocks in one pread), or the queue depth of the io_uring ring (reads in
  // the kernel at once; more wait in the source's queue). Sized like the
  // limiter's io_concurrency (Reader::OpenFile passes it); more would only
  // sit idle. Valid 1..4096.
  uint32_t threads = 64;
  // Try each buffered read inline with preadv2(RWF_NOWAIT) first: a
  // page-cache hit then completes on the calling thread with no hand-off; a
  // miss (EAGAIN) goes to the pool or the ring. Never with `direct` (a
  // direct read has no cache to hit; it would block the caller), nor on the
  // io_uring thread itself (its next io_uring_enter does the read for less).
  // Measured by `rangeio bench hot-cache` (row page-cache). On a cold file
  // a miss costs one failed preadv2 call: with and without it, alternating
  // runs of cold 4 KiB reads showed no difference beyond the noise.
  bool try_inline = true;
  // The pread pool's helper threads that share page-cache hits with the
  // caller's thread (with try_inline, buffered): while reads keep hitting
  // the cache, each is queued instead of read inline, and the helpers and
  // any consumer that would otherwise wait for a result (Source::Assist)
  // take them a batch at a time; when most of a batch misses, reads go back
  // to the inline attempt first. Unset: one per core beyond the caller's, at
  // most `threads` (none on one core). 0: every hit inline on the thread that
  // issues it. Started when a batch waits and none is free; each polls briefly,
  // then sleeps, when there is nothing to run, and reads through its own open
  // file description of the file (one description's reference count,
  // shared by threads, costs a cache-line transfer per read). The io_uring
  // engine ignores it. Valid 0..4096.
  std::optional<uint32_t> hit_threads;
  // The engine. kAuto resolves to DefaultLocalEngine(direct): io_uring for
  // O_DIRECT, the pread pool for buffered reads, for the measurements given
  // there. If the kernel refuses a ring (EPERM under a
  // seccomp filter or kernel.io_uring_disabled, ENOSYS before Linux 5.1,
  // ENOMEM under a tight RLIMIT_MEMLOCK), kAuto reads the file with the
  // pread pool instead and Describe() says why; an explicit kUring fails to
  // open, naming the cause. Asking for io_uring never silently gives
  // something slower.
  LocalEngine engine = LocalEngine::kAuto;
  // Open with O_DIRECT: reads bypass the page cache and go to the device in
  // buffers aligned to its direct-I/O alignment (statx STATX_DIOALIGN).
  // Each range is widened to aligned bounds, read whole, and handed back as
  // a sub-slice of that buffer (no copy); the buffer may hold up to two
  // alignment blocks more than the range, beyond the response budget's
  // count. With io_uring, reads of 64 KiB..1 MiB go into registered
  // buffers when one is free (pinned once instead of on every read: +70%
  // bandwidth at 1 MiB here): up to `threads` buffers of 1 MiB, pinned
  // while the file is open or a caller holds a slice of one. Opening fails
  // with InvalidArgument naming the file when its file system does not
  // support O_DIRECT. Default false: a buffered read that hits the page
  // cache costs ~1 us, a direct read always goes to the device.
  bool direct = false;
};

// The engine kAuto picks: io_uring for O_DIRECT files, the pread pool (with
// its inline preadv2 attempt) for buffered ones. Measured here (2-core VM,
// virtio disk, ext4, Linux 6.18) with `rangeio bench local` (ten runs on
// 2026-11-30, most on a shared machine; README "Measured figures") and
// `rangeio bench hot-cache`, at C = 64:
// - O_DIRECT, io_uring ahead: after the ring thread began submitting every
//   4 completion callbacks (uring_file.cc, kEagerSubmitEvery), 4 KiB reads
//   ran at 88-111k against 84-102k IOPS for 0.34-0.69 against 0.64-1.32
//   CPU s per 100k reads, and 1 MiB reads at 1.3-1.7x the bandwidth
//   (registered buffers) for a third of the CPU;
// - buffered and cold, the pool ahead: 4 KiB reads at 59-79k against
//   40-82k IOPS (ahead in 5 runs of 6): one ring thread sets up every
//   page-cache miss, where 64 pool threads spread that work; 1 MiB reads
//   mixed (ahead in 4 runs of 6);
// - buffered and in the page cache (bench hot-cache), the pool ahead: the
//   caller's thread and a helper share the hits (hit_threads), 55.9-57.3
//   ms for 51,200 reads against 163-177 ms through the ring thread (medians
//   of three runs).
constexpr LocalEngine DefaultLocalEngine(bool direct) {
  return direct ? LocalEngine::kUring : LocalEngine::kPread;
}

// A local file read by the engine `options` chooses. Fails before any read
// with NotFound / PermissionDenied / InvalidArgument (a directory, a bad
// option, O_DIRECT unsupported) naming `path`.
Result<std::shared_ptr<Source>> OpenLocalFile(
    const std::string& path, const LocalFileOptions& options = {});

// Options of every backend OpenSource may choose; each uses its own member.
struct SourceOptions {
  LocalFileOptions local;  // plain paths and file:// URLs
};

// Opens a source by URL or path, the one place names become backends:
// - a plain path ("data/a.bin", "/tmp/a.bin"): a local file;
// - "file:///abs/path" or "file://localhost/abs/path": a local file, with
//   %XX escapes decoded ("file:///a%20b" is "/a b").
// Any other scheme, a file:// URL naming another host, a relative or empty
// file:// path, or a bad escape is InvalidArgument naming the URL.
Result<std::shared_ptr<Source>> OpenSource(std::string_view url_or_path,
                                           const SourceOptions& options = {});

}  // namespace rangeio
