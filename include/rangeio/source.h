// rangeio/source.h — one readable object, read asynchronously.
//
// A Source is a file, an object in a store, or bytes in memory, with a known
// or discoverable size. The scheduler calls Read(); the backend completes it
// by calling the sink exactly once, from any thread, possibly before Read()
// returns (memory, page-cache hits: the fast path, not a special case). A
// backend never blocks the caller of Read() on I/O: it owns whatever threads
// it needs (a pread pool, an io_uring completion thread, a timer thread, ...).
//
// The backends live in their own headers: memory_source.h, local_file.h,
// sim.h, http.h, block_cache.h (a cache in front of any source), and
// open_source.h (a source by URL or path).
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
#include <vector>

#include "rangeio/byte_range.h"
#include "rangeio/export.h"
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
class RANGEIO_EXPORT ReadSink {
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

// What a source is, beyond its name: how a cache keys its bytes, how a
// Reader plans its reads, and what it says about itself in logs.
struct SourceInfo {
  // Equal only for sources that must give the same bytes. name() leaves out
  // what errors must not show (an S3 source's endpoint and credentials), so
  // remote sources add them here, secrets only as a hash. Never shown.
  // Empty means name().
  std::string cache_identity;
  // How a Reader plans reads of this source unless ReaderOptions::planner
  // says otherwise: the preset that suits the storage behind it.
  PlannerOptions planner = PlannerOptions::None();
  // One line for people and logs: the backend, how it is set up, and why
  // when it is not the one asked for (e.g. "pread pool, up to 64 threads,
  // buffered; io_uring unavailable: ..."). May include running counters.
  std::string description;
  // True when a read started while another read of the same bytes is out
  // waits for that one instead of reading again (a BlockCache reads each
  // block once for every concurrent miss). A second copy of a late read
  // could then never answer first, so a Reader does not hedge reads of
  // such a source (ReaderOptions::hedge). Decorators built on
  // SourceWrapper keep it: Info() forwards.
  bool joins_concurrent_reads = false;
};

class RANGEIO_EXPORT Source {
 public:
  // Source::Cancel's tag for every read of a sink.
  static constexpr uint64_t kAllReads = UINT64_MAX;

  Source() = default;
  Source(const Source&) = delete;
  Source& operator=(const Source&) = delete;
  virtual ~Source() = default;

  // --- What every source implements ---

  // What errors call this source: a path, a URL, a name given by the user.
  virtual const std::string& name() const = 0;

  // Size in bytes. May do I/O the first time (a stat, a request); cached.
  virtual Result<uint64_t> Size() = 0;

  // Starts reading `range`, which the caller has checked against Size().
  // Calls sink->OnReadDone(tag, ...) exactly once. A zero-length range
  // completes with an empty Slice. Never throws, never blocks on I/O.
  // `tag` is never kAllReads.
  virtual void Read(ByteRange range, ReadSink* sink, uint64_t tag) = 0;

  // --- What a source may refine (the defaults are correct) ---

  // Cache identity, planner preset and description (see SourceInfo). The
  // default: name(), PlannerOptions::None(), no description.
  virtual SourceInfo Info() const;

  // Starts several reads for one sink: the same as Read for each, in order
  // (the default does just that); a backend that queues reads for its own
  // threads queues them under one lock.
  virtual void ReadMany(std::span<const ReadRequest> reads, ReadSink* sink) {
    for (const ReadRequest& r : reads) Read(r.range, sink, r.tag);
  }

  // Asks the backend to abandon the read (sink, tag), or with kAllReads
  // every read it still runs for `sink`, whose results are no longer wanted
  // (a hedged read's loser, a cancelled stream). Best effort, never
  // blocking: a read the backend can still stop (a timer not yet due, a
  // transfer on the wire, a read still queued) completes at once with
  // Cancelled and frees its buffer; the others complete as usual. Either
  // way each is completed exactly once, possibly inside Cancel (the caller
  // holds no lock its sink takes). Unknown reads are ignored. The default
  // does nothing: reads complete in their own time.
  virtual void Cancel(ReadSink* sink, uint64_t tag) {
    (void)sink;
    (void)tag;
  }

  // Hands out, at once and with no I/O, the ranges this source already
  // holds in memory (a cache in front of it): sets (*out)[i] for each range
  // i it can serve and returns how many it set. `out` is empty on entry; a
  // source that serves any range resizes it to ranges.size() first. The
  // ranges are within Size(). A Reader calls it before admitting any read,
  // so such a range takes no permit and no response budget. The default
  // serves nothing.
  virtual size_t ReadCached(std::span<const ByteRange> ranges,
                            std::vector<std::optional<Slice>>* out) {
    (void)ranges;
    (void)out;
    return 0;
  }

  // Runs, on the calling thread, up to `max_reads` reads this source has
  // queued for its own threads and can finish without blocking (page-cache
  // hits waiting for a helper thread; an io_uring ring's submissions and
  // completions); returns how many it completed. A consumer that would
  // otherwise wait calls it, so the waiting thread does the work. The
  // default runs nothing.
  virtual size_t Assist(size_t max_reads) {
    (void)max_reads;
    return 0;
  }
};

// A Source that forwards every call to another, for decorators to derive
// from (as LevelDB's EnvWrapper): override what the decorator changes, and
// the rest reaches the target. ReadMany is the exception: it stays the
// default, one call of this->Read per read, so that a decorator's Read is
// never bypassed; one that leaves Read alone may forward ReadMany too.
// target() lets code see through decorators (GetHttpStats does).
class RANGEIO_EXPORT SourceWrapper : public Source {
 public:
  explicit SourceWrapper(std::shared_ptr<Source> target)
      : target_(std::move(target)) {}

  const std::shared_ptr<Source>& target() const { return target_; }

  const std::string& name() const override { return target_->name(); }
  Result<uint64_t> Size() override { return target_->Size(); }
  void Read(ByteRange range, ReadSink* sink, uint64_t tag) override {
    target_->Read(range, sink, tag);
  }
  SourceInfo Info() const override { return target_->Info(); }
  void Cancel(ReadSink* sink, uint64_t tag) override {
    target_->Cancel(sink, tag);
  }
  size_t ReadCached(std::span<const ByteRange> ranges,
                    std::vector<std::optional<Slice>>* out) override {
    return target_->ReadCached(ranges, out);
  }
  size_t Assist(size_t max_reads) override {
    return target_->Assist(max_reads);
  }

 private:
  const std::shared_ptr<Source> target_;
};

}  // namespace rangeio
