// rangeio/batch.h — many threads reading one object: cross-caller batching.
//
// Blob stores, media files and row lookups reach a reader as many threads
// each asking for a few ranges of the same object at once. A BatchedReader
// is the thread-safe handle they share: requests that arrive while earlier
// ones are being dispatched queue up, and the next free dispatcher drains
// all of them as one batch, plans them together (the Reader's planner
// coalesces across callers) and reads them as one stream. A drained batch
// goes out at once; it never waits for an earlier batch's I/O (the
// `serialized` mode, where it does, exists only as the benchmark baseline).
// I/O concurrency and byte backpressure come only from the Reader's Limiter.
//
// Blobs packed into one object are read through BlobHandles, logical slices
// of the object that share its batching. An error reaches only the callers
// whose ranges it affects: when a batch's stream fails, its undelivered
// ranges are read again one by one, and each caller gets its own result.
//
// Callbacks run on a dispatcher thread; they must not block for long (a
// blocking Read() is a callback that fulfils a promise).
//
// Thread-safety: BatchedReader and BlobHandle are thread-safe. Destroying the
// last handle waits for the batches in progress to finish.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <memory>

#include "rangeio/byte_range.h"
#include "rangeio/reader.h"
#include "rangeio/slice.h"
#include "rangeio/status.h"

namespace rangeio {

enum class BatchMode {
  // Each drained batch is dispatched at once, whatever is in flight.
  kDispatched,
  // Benchmark baseline only: a batch is drained only after the previous
  // batch's reads have all completed (the behaviour Lance fixed in 2026).
  kSerialized,
};

struct BatchOptions {
  BatchMode mode = BatchMode::kDispatched;
  // Dispatcher threads, each reading one batch at a time: the most batches
  // in progress at once. 0 means the limiter's io_concurrency: a batch holds
  // at least one read in flight, so more batches could not all progress.
  // Valid 0..4096.
  uint32_t max_dispatchers = 0;
  // Most requests in one batch; the rest wait for the next one. Valid
  // 1..1,048,576. 4096: plans stay a few hundred microseconds long.
  uint32_t max_batch_requests = 4096;

  Status Validate() const;
};

struct BatchStats {
  uint64_t requests = 0;        // ranges asked for
  uint64_t batches = 0;         // streams started
  uint64_t largest_batch = 0;   // requests in the largest batch
  uint64_t retried_singly = 0;  // ranges re-read alone after a batch failed
  uint64_t rejected = 0;        // requests refused before any I/O
};

class BatchedReader;

// A blob packed inside a BatchedReader's object: [offset, offset + size).
// Ranges are relative to the blob. Copyable; shares the object's batching.
class BlobHandle {
 public:
  uint64_t offset() const { return offset_; }
  uint64_t size() const { return size_; }
  Result<Slice> Read(ByteRange range) const;
  void ReadAsync(ByteRange range,
                 std::function<void(Result<Slice>)> done) const;

 private:
  friend class BatchedReader;
  BlobHandle(std::shared_ptr<BatchedReader> object, uint64_t offset,
             uint64_t size)
      : object_(std::move(object)), offset_(offset), size_(size) {}
  std::shared_ptr<BatchedReader> object_;
  uint64_t offset_;
  uint64_t size_;
};

class BatchedReader : public std::enable_shared_from_this<BatchedReader> {
 public:
  // Batches reads of `reader`'s source through `reader` (its limiter, stats
  // and planner). Fails on invalid options or when the size is unknown.
  static Result<std::shared_ptr<BatchedReader>> Open(
      Reader reader, const BatchOptions& options = {});
  virtual ~BatchedReader() = default;

  // Blocks until the range's bytes (or its own error) are there. A range
  // past the end of the object fails at once, with no I/O.
  virtual Result<Slice> Read(ByteRange range) = 0;
  // Calls `done` exactly once with the bytes or the error, on a dispatcher
  // thread (or on this thread, for a range refused before any I/O).
  virtual void ReadAsync(ByteRange range,
                         std::function<void(Result<Slice>)> done) = 0;
  std::future<Result<Slice>> ReadFuture(ByteRange range);

  // The blob [offset, offset + size) of this object; InvalidArgument when it
  // does not lie within the object.
  Result<BlobHandle> Blob(uint64_t offset, uint64_t size);

  virtual uint64_t size() const = 0;
  virtual BatchStats GetStats() const = 0;
  virtual const Reader& reader() const = 0;
};

}  // namespace rangeio
