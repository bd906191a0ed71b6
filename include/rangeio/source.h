// rangeio/source.h — one readable object, read asynchronously.
//
// A Source is a file, an object in a store, or bytes in memory, with a known
// or discoverable size. The scheduler calls Read(); the backend completes it
// by calling the sink exactly once, from any thread, possibly before Read()
// returns (memory, page-cache hits: the fast path, not a special case). A
// backend never blocks the caller of Read() on I/O: it owns whatever threads
// it needs (a pread pool, a timer thread, ...).
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

// Receives completions. `tag` is the value passed to Source::Read.
class ReadSink {
 public:
  // On success `bytes` holds exactly the requested length (the Reader turns
  // any other length into an IoError, never short data). On failure the
  // Status gives the backend cause (errno text, ...); the Reader prefixes
  // the range, its request index and the source's name.
  virtual void OnReadDone(uint64_t tag, Result<Slice> bytes) = 0;

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
};

// --- Backends -------------------------------------------------------------

// Bytes in memory. `data` is shared, never copied at construction. With
// zero_copy, reads complete inline with Slices of `data` itself; without it,
// each read copies its bytes into a new buffer (what a backend that owns its
// buffers costs, and the baseline for the zero-copy path).
std::shared_ptr<Source> MakeMemorySource(std::string name, Slice data,
                                         bool zero_copy = true);

struct LocalFileOptions {
  // Threads in the pread pool: the number of preads that can block at once.
  // Sized like the limiter's io_concurrency (Reader::Open passes it); more
  // threads than in-flight reads would only sleep. Valid 1..4096.
  uint32_t threads = 64;
  // Try each read inline with preadv2(RWF_NOWAIT) first: a page-cache hit
  // then completes on the calling thread with no hand-off; a miss (EAGAIN)
  // goes to the pool. Measured by `rangeio bench hot-cache` (page-cache row).
  bool try_inline = true;
};

// A local file read with pread on a thread pool. Fails before any read with
// NotFound / PermissionDenied / InvalidArgument (a directory) naming `path`.
Result<std::shared_ptr<Source>> OpenLocalFile(
    const std::string& path, const LocalFileOptions& options = {});

}  // namespace rangeio
