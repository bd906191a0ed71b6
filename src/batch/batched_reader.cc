// BatchedReader (see rangeio/batch.h).
//
// Requests queue in `pending`; dispatcher threads, started on demand up to
// max_dispatchers, each take everything queued (up to max_batch_requests)
// as one batch and read it as one as-completed stream, calling each
// request's callback as its range arrives. In serialized mode a batch is
// taken only once the previous one has finished.
//
// The threads share a Core with the handle; destroying the handle stops
// them once the queue is empty (every callback still runs exactly once).
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "rangeio/batch.h"
#include "thread_name.h"

namespace rangeio {
namespace {

struct Request {
  ByteRange range;
  std::function<void(Result<Slice>)> done;
};

class Core : public std::enable_shared_from_this<Core> {
 public:
  Core(Reader reader, BatchOptions options, uint32_t max_dispatchers)
      : reader_(std::move(reader)),
        options_(options),
        max_dispatchers_(max_dispatchers) {}

  void Enqueue(Request r) {
    std::lock_guard lk(mu_);
    ++stats_.requests;
    pending_.push_back(std::move(r));
    if (idle_ > 0) {
      cv_.notify_one();
    } else if (threads_.size() < max_dispatchers_) {
      threads_.emplace_back([self = shared_from_this()] {
        detail::NameThisThread("rio-batch");
        self->Work();
      });
    }
  }

  void Reject() {
    std::lock_guard lk(mu_);
    ++stats_.requests;
    ++stats_.rejected;
  }

  // Lets the dispatchers finish the queue and exit; joins them unless called
  // on one of them (a callback dropped the last handle), which then detaches.
  void Stop() {
    std::vector<std::thread> threads;
    {
      std::lock_guard lk(mu_);
      stop_ = true;
      threads.swap(threads_);
    }
    cv_.notify_all();
    for (std::thread& t : threads) {
      if (t.get_id() == std::this_thread::get_id()) {
        t.detach();
      } else {
        t.join();
      }
    }
  }

  BatchStats GetStats() const {
    std::lock_guard lk(mu_);
    return stats_;
  }
  const Reader& reader() const { return reader_; }

 private:
  bool CanTakeLocked() const {
    return !pending_.empty() &&
           (options_.mode == BatchMode::kDispatched || !serial_busy_);
  }

  void Work() {
    std::unique_lock lk(mu_);
    for (;;) {
      ++idle_;
      cv_.wait(lk,
               [&] { return CanTakeLocked() || (stop_ && pending_.empty()); });
      --idle_;
      if (!CanTakeLocked()) return;  // stopped, queue empty
      std::vector<Request> batch;
      const size_t n =
          std::min<size_t>(pending_.size(), options_.max_batch_requests);
      batch.reserve(n);
      for (size_t i = 0; i < n; ++i) {
        batch.push_back(std::move(pending_.front()));
        pending_.pop_front();
      }
      ++stats_.batches;
      stats_.largest_batch = std::max<uint64_t>(stats_.largest_batch, n);
      serial_busy_ = options_.mode == BatchMode::kSerialized;
      // More queued than one batch takes: another dispatcher may start on
      // the rest now.
      if (!pending_.empty() && idle_ > 0) cv_.notify_one();
      lk.unlock();
      Run(batch);
      lk.lock();
      if (options_.mode == BatchMode::kSerialized) {
        serial_busy_ = false;
        cv_.notify_all();
      }
    }
  }

  void Run(std::vector<Request>& batch) {
    std::vector<ByteRange> ranges;
    ranges.reserve(batch.size());
    for (const Request& r : batch) ranges.push_back(r.range);
    std::vector<bool> delivered(batch.size());
    Result<RangeStream> stream =
        reader_.ReadRanges(ranges, Delivery::kAsCompleted);
    if (stream.ok()) {
      for (;;) {
        Result<std::optional<RangeResult>> r = stream->Next();
        if (!r.ok() || !*r) break;
        delivered[(*r)->index] = true;
        batch[(*r)->index].done(std::move((*r)->bytes));
      }
      stream->Cancel();
    }
    // The batch failed: each range it left is read alone, so that an error
    // reaches only the callers whose ranges it affects.
    for (size_t i = 0; i < batch.size(); ++i) {
      if (delivered[i]) continue;
      {
        std::lock_guard lk(mu_);
        ++stats_.retried_singly;
      }
      batch[i].done(ReadOne(batch[i].range));
    }
  }

  Result<Slice> ReadOne(ByteRange range) {
    RANGEIO_ASSIGN_OR_RETURN(RangeStream s, reader_.ReadRanges({&range, 1}));
    RANGEIO_ASSIGN_OR_RETURN(std::optional<RangeResult> r, s.Next());
    if (!r) {
      return Status::Internal("rangeio: a one-range stream of '" +
                              reader_.source()->name() + "' ended empty");
    }
    return std::move(r->bytes);
  }

  const Reader reader_;
  const BatchOptions options_;
  const uint32_t max_dispatchers_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Request> pending_;       // GUARDED_BY(mu_)
  std::vector<std::thread> threads_;  // GUARDED_BY(mu_)
  size_t idle_ = 0;                   // GUARDED_BY(mu_)
  bool serial_busy_ = false;          // GUARDED_BY(mu_)
  bool stop_ = false;                 // GUARDED_BY(mu_)
  BatchStats stats_;                  // GUARDED_BY(mu_)
};

class BatchedReaderImpl final : public BatchedReader {
 public:
  BatchedReaderImpl(std::shared_ptr<Core> core, uint64_t size)
      : core_(std::move(core)), size_(size) {}
  ~BatchedReaderImpl() override { core_->Stop(); }

  Result<Slice> Read(ByteRange range) override {
    return ReadFuture(range).get();
  }

  void ReadAsync(ByteRange range,
                 std::function<void(Result<Slice>)> done) override {
    Status st = Check(range);
    if (!st.ok()) {
      core_->Reject();
      done(std::move(st));
      return;
    }
    core_->Enqueue({range, std::move(done)});
  }

  uint64_t size() const override { return size_; }
  BatchStats GetStats() const override { return core_->GetStats(); }
  const Reader& reader() const override { return core_->reader(); }

 private:
  Status Check(const ByteRange& range) const {
    const std::string& name = core_->reader().source()->name();
    if (range.length > UINT64_MAX - range.offset) {
      return Status::InvalidArgument(
          "range offset " + std::to_string(range.offset) + " + length " +
          std::to_string(range.length) + " of '" + name +
          "' overflows 64 bits");
    }
    return range.CheckWithin(size_, name);
  }

  const std::shared_ptr<Core> core_;
  const uint64_t size_;
};

}  // namespace

Status BatchOptions::Validate() const {
  if (max_dispatchers > 4096) {
    return Status::InvalidArgument(
        "BatchOptions.max_dispatchers=" + std::to_string(max_dispatchers) +
        " is invalid: valid 0..4096");
  }
  if (max_batch_requests < 1 || max_batch_requests > (1u << 20)) {
    return Status::InvalidArgument("BatchOptions.max_batch_requests=" +
                                   std::to_string(max_batch_requests) +
                                   " is invalid: valid 1..1048576");
  }
  if (mode != BatchMode::kDispatched && mode != BatchMode::kSerialized) {
    return Status::InvalidArgument(
        "BatchOptions.mode=" + std::to_string(static_cast<int>(mode)) +
        " is invalid: valid dispatched, serialized");
  }
  return Status::OK();
}

Result<std::shared_ptr<BatchedReader>> BatchedReader::Open(
    Reader reader, const BatchOptions& options) {
  RANGEIO_RETURN_NOT_OK(options.Validate());
  RANGEIO_ASSIGN_OR_RETURN(const uint64_t size, reader.source()->Size());
  const uint32_t dispatchers = options.max_dispatchers != 0
                                   ? options.max_dispatchers
                                   : reader.limiter()->io_concurrency();
  auto core = std::make_shared<Core>(std::move(reader), options, dispatchers);
  return std::shared_ptr<BatchedReader>(
      std::make_shared<BatchedReaderImpl>(std::move(core), size));
}

std::future<Result<Slice>> BatchedReader::ReadFuture(ByteRange range) {
  auto promise = std::make_shared<std::promise<Result<Slice>>>();
  std::future<Result<Slice>> f = promise->get_future();
  ReadAsync(range,
            [promise](Result<Slice> r) { promise->set_value(std::move(r)); });
  return f;
}

Result<BlobHandle> BatchedReader::Blob(uint64_t offset, uint64_t size) {
  if (size > UINT64_MAX - offset || offset + size > this->size()) {
    return Status::InvalidArgument("blob at offset " + std::to_string(offset) +
                                   " of " + std::to_string(size) +
                                   " bytes does not lie within '" +
                                   reader().source()->name() + "' (" +
                                   std::to_string(this->size()) + " bytes)");
  }
  return BlobHandle(shared_from_this(), offset, size);
}

Result<Slice> BlobHandle::Read(ByteRange range) const {
  auto promise = std::make_shared<std::promise<Result<Slice>>>();
  std::future<Result<Slice>> f = promise->get_future();
  ReadAsync(range,
            [promise](Result<Slice> r) { promise->set_value(std::move(r)); });
  return f.get();
}

void BlobHandle::ReadAsync(ByteRange range,
                           std::function<void(Result<Slice>)> done) const {
  if (range.length > UINT64_MAX - range.offset ||
      range.offset + range.length > size_) {
    done(Status::OutOfRange(
        "range " +
        (range.length > UINT64_MAX - range.offset
             ? std::to_string(range.offset) + "+" + std::to_string(range.length)
             : range.ToString()) +
        " is past the end of the blob [" + std::to_string(offset_) + ", " +
        std::to_string(offset_ + size_) + ") of '" +
        object_->reader().source()->name() + "' (" + std::to_string(size_) +
        " bytes)"));
    return;
  }
  object_->ReadAsync({offset_ + range.offset, range.length}, std::move(done));
}

}  // namespace rangeio
