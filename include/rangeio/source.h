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
#include "rangeio/slice.h"
#include "rangeio/status.h"

namespace rangeio {

struct PlannerOptions;  // rangeio/planner.h

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

  // Which bytes this source reads, for a cache to key them by: equal only
  // for sources that must give the same bytes. name() leaves out what
  // errors must not show (an S3 source's endpoint and credentials), so
  // remote sources add them here, the secrets only as a hash. Never shown.
  virtual std::string CacheIdentity() const { return name(); }

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

  // Asks the backend to abandon the read it accepted as (sink, tag), whose
  // result is no longer wanted (a hedged read's loser). Best effort and
  // never blocking: a backend that can still stop it (a timer not yet due,
  // a transfer on the wire, a read still queued) completes it at once with
  // a Cancelled status and frees its buffer; one that cannot, or a read
  // already finished, completes as usual. Either way the sink is called
  // exactly once, possibly inside Cancel (the caller holds no lock its
  // sink takes). An unknown (sink, tag) is ignored. The default does
  // nothing: the read completes in its own time.
  virtual void Cancel(ReadSink* sink, uint64_t tag) {
    (void)sink;
    (void)tag;
  }

  // How a Reader plans reads of this source unless Options::planner says
  // otherwise: the preset that suits the storage behind it. The default,
  // PlannerOptions::None(), reads each range as requested. Callers include
  // rangeio/planner.h to use the result.
  virtual PlannerOptions DefaultPlannerOptions() const;

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
  // hits waiting for a helper thread; an io_uring ring's submissions and
  // completions), completing them as usual; returns how many it completed.
  // A Reader's consumer calls it when it has no result to take and would
  // otherwise wait: the waiting thread does the work instead of idling
  // while the source's threads do it. Never blocks on I/O. Thread-safe.
  // The default runs nothing.
  virtual size_t Assist(size_t max_reads) {
    (void)max_reads;
    return 0;
  }

  // Asks the source to end early the reads it still runs for `sink` (a
  // stream that was cancelled): each still completes exactly once, with
  // Cancelled or with its result if it was done. Remote sources abort the
  // transfer, so that its permit, buffer and connection come back at once
  // rather than after its timeouts. The default does nothing: a local read
  // ends soon anyway.
  virtual void CancelReads(ReadSink* /*sink*/) {}

  // One line for people and logs: which backend serves this source, how it
  // is set up, and why when it is not the one that was asked for (e.g.
  // "pread pool, up to 64 threads, buffered; io_uring unavailable: ...").
  // May include running counters. The default says nothing (empty).
  virtual std::string Describe() const { return {}; }
};

}  // namespace rangeio
