// rangeio/batch.h — many threads reading one or more objects: cross-caller
// batching.
//
// Blob stores, media files and row lookups reach a reader as many threads
// each asking for a few ranges at once. A BatchedReader is the thread-safe
// handle they share. It spans one source or several (objects: one per blob,
// or the files of a dataset), as one batching scheduler: a request
// (source, range) that finds no batch being started and fewer than
// max_batches in progress starts a batch at once, on the caller's thread;
// requests that arrive meanwhile queue up and go out together as the next
// batch, as soon as one may start. A batch is planned per source (the
// planner coalesces across callers within each object, never across
// objects), every source's reads start at once, and results go back as they
// complete, whichever source they come from. A batch never waits for an
// earlier batch's I/O, only for a place among max_batches; I/O concurrency
// and byte backpressure come from the Readers' Limiter(s); sources that
// should share a budget share one.
//
// Blobs packed into one object are read through BlobHandles, logical slices
// of the object that share the handle's batching. An error reaches only the
// callers whose ranges it affects: a batch's streams have per-range errors
// (ReadOptions::per_range_errors), so a failed coalesced read is read again
// range by range in the core, and each caller gets its own result.
//
// The one-source calls (Read(range), Blob(offset, size), size(), reader())
// are those of source 0: a BatchedReader opened on one Reader is the
// single-object handle.
//
// No thread of its own: callbacks run on the thread that completes the read
// (a backend's; the caller's for an inline read or a request refused before
// any I/O), as push delivery does (range_stream.h); they must not block (a
// blocking Read() is a callback that fulfils a promise).
//
// Thread-safety: BatchedReader and BlobHandle are thread-safe. Destroying the
// last handle waits for the requests in progress to complete, except inside
// one of its callbacks, where it cannot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <vector>

#include "rangeio/byte_range.h"
#include "rangeio/export.h"
#include "rangeio/reader.h"
#include "rangeio/slice.h"
#include "rangeio/status.h"

namespace rangeio {

struct RANGEIO_EXPORT BatchOptions {
  // Batches in progress at once; requests wait for one to end past that.
  // 0 means the sum of io_concurrency over the sources' distinct limiters
  // (at most 4096): a batch holds at least one read in flight, so more
  // could not all progress. Valid 0..4096.
  uint32_t max_batches = 0;
  // Most requests in one batch; the rest wait for the next one. Valid
  // 1..1,048,576. 4096: plans stay a few hundred microseconds long.
  uint32_t max_batch_requests = 4096;

  Status Validate() const;
};

struct RANGEIO_EXPORT BatchStats {
  uint64_t requests = 0;       // ranges asked for
  uint64_t batches = 0;        // batches started
  uint64_t largest_batch = 0;  // requests in the largest batch
  uint64_t most_sources = 0;   // sources in the batch that spanned most
  uint64_t rejected = 0;       // requests refused before any I/O
};

class BatchedReader;

// A blob packed inside one of a BatchedReader's objects: [offset,
// offset + size) of source `source()`. Ranges are relative to the blob.
// Copyable; shares the handle's batching.
class RANGEIO_EXPORT BlobHandle {
 public:
  size_t source() const { return source_; }
  uint64_t offset() const { return offset_; }
  uint64_t size() const { return size_; }
  Result<Slice> Read(ByteRange range) const;
  void ReadAsync(ByteRange range,
                 std::function<void(Result<Slice>)> done) const;

 private:
  friend class BatchedReader;
  BlobHandle(std::shared_ptr<BatchedReader> object, size_t source,
             uint64_t offset, uint64_t size)
      : object_(std::move(object)),
        source_(source),
        offset_(offset),
        size_(size) {}
  std::shared_ptr<BatchedReader> object_;
  size_t source_;
  uint64_t offset_;
  uint64_t size_;
};

class RANGEIO_EXPORT BatchedReader
    : public std::enable_shared_from_this<BatchedReader> {
 public:
  // Batches reads of `reader`'s source through `reader` (its limiter, stats
  // and planner). Fails on invalid options or when the size is unknown.
  static Result<std::shared_ptr<BatchedReader>> Open(
      Reader reader, const BatchOptions& options = {});
  // One handle batching the reads of several sources: source i is read
  // through readers[i]. Fails on invalid options, on an empty list, or when
  // a size is unknown (the error names the source).
  static Result<std::shared_ptr<BatchedReader>> Open(
      std::vector<Reader> readers, const BatchOptions& options = {});
  virtual ~BatchedReader() = default;

  // Blocks until the range's bytes (or its own error) are there. A range
  // past the end of the object, or a source index out of range, fails at
  // once, with no I/O.
  Result<Slice> Read(size_t source, ByteRange range);
  Result<Slice> Read(ByteRange range) { return Read(0, range); }
  // Calls `done` exactly once with the bytes or the error, on the thread
  // that completes the read (this one for an inline read, or for a request
  // refused before any I/O).
  virtual void ReadAsync(size_t source, ByteRange range,
                         std::function<void(Result<Slice>)> done) = 0;
  void ReadAsync(ByteRange range, std::function<void(Result<Slice>)> done) {
    ReadAsync(0, range, std::move(done));
  }
  std::future<Result<Slice>> ReadFuture(size_t source, ByteRange range);
  std::future<Result<Slice>> ReadFuture(ByteRange range) {
    return ReadFuture(0, range);
  }

  // The blob [offset, offset + size) of source `source`; InvalidArgument
  // when it does not lie within that object (or there is no such source).
  Result<BlobHandle> Blob(size_t source, uint64_t offset, uint64_t size);
  Result<BlobHandle> Blob(uint64_t offset, uint64_t size) {
    return Blob(0, offset, size);
  }

  virtual size_t source_count() const = 0;
  // Size and Reader of source `source` (< source_count()).
  virtual uint64_t size(size_t source) const = 0;
  uint64_t size() const { return size(0); }
  virtual const Reader& reader(size_t source) const = 0;
  const Reader& reader() const { return reader(0); }
  virtual BatchStats GetStats() const = 0;
};

}  // namespace rangeio
