// BatchedReader (see rangeio/batch.h).
//
// Requests queue in `pending`; dispatcher threads, started on demand up to
// max_dispatchers, each take everything queued (up to max_batch_requests)
// as one batch. When a dispatcher is idle (dispatched mode), the caller's
// thread takes the batch and starts its reads itself, and the dispatcher
// only consumes it (`started`). The batch is grouped by source; each source's
// ranges are read as one as-completed stream (planned together), every stream
// is started before any is consumed, and the dispatcher hands each result to
// its request's callback as it arrives: the streams share a Waker and the
// dispatcher polls them all, sleeping only when none has anything new. In
// serialized mode (the benchmark's baseline, batch/baselines.h) a drained
// batch starts only once the previous one has finished on every source.
//
// The threads share a Core with the handle; destroying the handle stops
// them once the queue is empty (every callback still runs exactly once).
#include <algorithm>
#include <chrono>
#include <deque>
#include <optional>
#include <thread>
#include <vector>

#include "batch/baselines.h"
#include "util/mutex.h"
#include "rangeio/batch.h"
#include "stream/waker.h"
#include "util/thread_name.h"

namespace rangeio {
namespace {

using detail::BatchMode;
using detail::CondVar;
using detail::Mutex;
using detail::MutexLock;

struct Request {
  size_t source;
  ByteRange range;
  std::function<void(Result<Slice>)> done;
};

// How long a dispatcher polling several streams sleeps at most when none
// has changed: only so that a stalled stream's response_stall_timeout is
// checked (results and failures wake it at once).
constexpr std::chrono::milliseconds kStallCheck{50};

class Core : public std::enable_shared_from_this<Core> {
 public:
  Core(std::vector<Reader> readers, BatchOptions options, BatchMode mode,
       uint32_t max_dispatchers)
      : readers_(std::move(readers)),
        options_(options),
        mode_(mode),
        max_dispatchers_(max_dispatchers),
        last_batch_of_(readers_.size(), 0) {}

  void Enqueue(Request r) EXCLUDES(mu_) {
    MutexLock lk(mu_);
    ++stats_.requests;
    pending_.push_back(std::move(r));
    if (mode_ == BatchMode::kDispatched && !starting_ && idle_ > claimed_) {
      // A dispatcher is idle: the batch's reads start here and now, and the
      // dispatcher, woken meanwhile, only hands the results back. Waking it
      // first put its scheduling delay before every read (bench blob, on a
      // busy machine).
      ++claimed_;
      starting_ = true;
      Started started;
      started.batch = TakeBatchLocked();
      lk.Unlock();
      started.groups = Start(started.batch);
      lk.Lock();
      starting_ = false;
      started_.push_back(std::move(started));
    }
    WakeOrSpawnLocked();
  }

  void Reject() EXCLUDES(mu_) {
    MutexLock lk(mu_);
    ++stats_.requests;
    ++stats_.rejected;
  }

  // Lets the dispatchers finish the queue and exit; joins them unless called
  // on one of them (a callback dropped the last handle), which then detaches.
  void Stop() EXCLUDES(mu_) {
    std::vector<std::thread> threads;
    {
      MutexLock lk(mu_);
      stop_ = true;
      threads.swap(threads_);
    }
    cv_.NotifyAll();
    for (std::thread& t : threads) {
      if (t.get_id() == std::this_thread::get_id()) {
        t.detach();
      } else {
        t.join();
      }
    }
  }

  BatchStats GetStats() const EXCLUDES(mu_) {
    MutexLock lk(mu_);
    return stats_;
  }
  const Reader& reader(size_t source) const { return readers_[source]; }
  size_t source_count() const { return readers_.size(); }

 private:
  // One source's share of a batch: the requests (indexes into the batch),
  // in arrival order, and the stream reading them.
  struct Group {
    size_t source = 0;
    std::vector<size_t> members;
    std::optional<RangeStream> stream;
  };

  // A batch whose reads a caller's thread started, for a dispatcher to
  // consume.
  struct Started {
    std::vector<Request> batch;
    std::vector<Group> groups;
  };

  // Serialized mode drains the next batch while the previous one is in
  // flight, and holds it until that one has finished: at most one batch
  // reading and one drained batch waiting, as the old Lance scheduler had.
  bool CanTakeLocked() const REQUIRES(mu_) {
    return !pending_.empty() &&
           (mode_ == BatchMode::kDispatched || !serial_waiting_);
  }

  // Wakes an idle dispatcher for a started batch, and one not promised to a
  // started batch for the queued requests, or starts one for them: a
  // wake-up for a started batch must not stand in for the queue's, or the
  // queue waits until some batch finishes.
  void WakeOrSpawnLocked() REQUIRES(mu_) {
    if (!started_.empty() && idle_ > 0) cv_.NotifyOne();
    if (!CanTakeLocked()) return;
    if (idle_ > claimed_) {
      cv_.NotifyOne();
    } else if (threads_.size() < max_dispatchers_) {
      threads_.emplace_back([self = shared_from_this()] {
        detail::NameThisThread("rio-batch");
        self->Work();
      });
    }
  }

  // Takes up to max_batch_requests queued requests as the next batch.
  std::vector<Request> TakeBatchLocked() REQUIRES(mu_) {
    std::vector<Request> batch;
    const size_t n =
        std::min<size_t>(pending_.size(), options_.max_batch_requests);
    batch.reserve(n);
    const uint64_t batch_no = ++stats_.batches;
    uint64_t sources = 0;
    for (size_t i = 0; i < n; ++i) {
      batch.push_back(std::move(pending_.front()));
      pending_.pop_front();
      uint64_t& last = last_batch_of_[batch.back().source];
      if (last != batch_no) {
        last = batch_no;
        ++sources;
      }
    }
    stats_.largest_batch = std::max<uint64_t>(stats_.largest_batch, n);
    stats_.most_sources = std::max(stats_.most_sources, sources);
    return batch;
  }

  // What a dispatcher waits for. An idle dispatcher owed to a batch a
  // caller is starting does not take queued requests: that batch's results,
  // holding response budget, would then wait for a dispatcher to be free.
  bool DispatcherHasWorkLocked() const REQUIRES(mu_) {
    return !started_.empty() || (CanTakeLocked() && idle_ > claimed_) ||
           (stop_ && pending_.empty() && started_.empty());
  }

  void Work() EXCLUDES(mu_) {
    MutexLock lk(mu_);
    for (;;) {
      ++idle_;
      while (!DispatcherHasWorkLocked()) cv_.Wait(lk);
      --idle_;
      if (!started_.empty()) {
        Started s = std::move(started_.front());
        started_.pop_front();
        --claimed_;
        lk.Unlock();
        Finish(s.batch, s.groups);
        lk.Lock();
        continue;
      }
      if (!CanTakeLocked()) return;  // stopped, queue empty
      std::vector<Request> batch = TakeBatchLocked();
      const bool serialized = mode_ == BatchMode::kSerialized;
      if (serialized) {
        // The drained batch waits for the previous batch's I/O; once it
        // starts, the requests queued meanwhile (the previous batch's
        // callers, as their reads completed) become the next waiting
        // batch. So callers settle into two cohorts whose batches
        // alternate, each waiting for the other's slowest read.
        serial_waiting_ = true;
        while (serial_busy_) cv_.Wait(lk);
        serial_waiting_ = false;
        serial_busy_ = true;
      }
      // More queued than one batch takes (or, serialized, queued while this
      // batch waited): another dispatcher starts on the rest now.
      WakeOrSpawnLocked();
      lk.Unlock();
      std::vector<Group> groups = Start(batch);
      Finish(batch, groups);
      lk.Lock();
      if (serialized) {
        serial_busy_ = false;
        cv_.NotifyAll();
      }
    }
  }

  // Groups the batch by source, arrival order kept within each source.
  static std::vector<Group> GroupBySource(const std::vector<Request>& batch) {
    std::vector<size_t> order(batch.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return batch[a].source < batch[b].source;
    });
    std::vector<Group> groups;
    for (size_t i : order) {
      if (groups.empty() || groups.back().source != batch[i].source) {
        groups.push_back({batch[i].source, {}, {}});
      }
      groups.back().members.push_back(i);
    }
    return groups;
  }

  // Starts every source's reads of the batch (before any is consumed).
  std::vector<Group> Start(const std::vector<Request>& batch) const {
    std::vector<Group> groups = GroupBySource(batch);
    for (Group& g : groups) {
      std::vector<ByteRange> ranges;
      ranges.reserve(g.members.size());
      for (size_t i : g.members) ranges.push_back(batch[i].range);
      Result<RangeStream> stream =
          readers_[g.source].ReadRanges(ranges, Delivery::kAsCompleted);
      if (stream.ok()) g.stream.emplace(std::move(*stream));
    }
    return groups;
  }

  // Hands every result of a started batch to its caller.
  void Finish(std::vector<Request>& batch, std::vector<Group>& groups)
      EXCLUDES(mu_) {
    std::vector<bool> delivered(batch.size());
    auto deliver = [&](const Group& g, RangeResult r) {
      const size_t i = g.members[r.index];
      delivered[i] = true;
      batch[i].done(std::move(r.bytes));
    };
    Consume(groups, deliver);
    // A stream failed: each range it left is read alone, so that an error
    // reaches only the callers whose ranges it affects.
    for (size_t i = 0; i < batch.size(); ++i) {
      if (delivered[i]) continue;
      {
        MutexLock lk(mu_);
        ++stats_.retried_singly;
      }
      batch[i].done(ReadOne(batch[i].source, batch[i].range));
    }
  }

  // The streams of the batch's sources as one as-completed unit. One
  // source goes this way too (not through the stream's blocking Next()):
  // Next() spins on yields before it sleeps, which suits local reads of
  // microseconds but, with a dispatcher per batch in flight, burns the
  // cores that the remote reads' completions need.
  template <typename Deliver>
  static void Consume(std::vector<Group>& groups, Deliver& deliver) {
    auto waker = std::make_shared<detail::Waker>();
    size_t live = 0;
    for (Group& g : groups) {
      if (!g.stream) continue;
      detail::StreamAccess::SetWaker(*g.stream, waker);
      ++live;
    }
    while (live > 0) {
      const uint64_t seen = waker->changes();
      bool progress = false;
      for (Group& g : groups) {
        while (g.stream) {
          bool pending = false;
          Result<std::optional<RangeResult>> r =
              detail::StreamAccess::Poll(*g.stream, &pending);
          if (r.ok() && pending) break;
          progress = true;
          if (!r.ok() || !*r) {
            g.stream->Cancel();
            g.stream.reset();
            --live;
            break;
          }
          deliver(g, std::move(**r));
        }
      }
      if (live > 0 && !progress) waker->WaitForChange(seen, kStallCheck);
    }
  }

  Result<Slice> ReadOne(size_t source, ByteRange range) {
    const Reader& reader = readers_[source];
    RANGEIO_ASSIGN_OR_RETURN(RangeStream s, reader.ReadRanges({&range, 1}));
    RANGEIO_ASSIGN_OR_RETURN(std::optional<RangeResult> r, s.Next());
    if (!r) {
      return Status::Internal("rangeio: a one-range stream of '" +
                              reader.source()->name() + "' ended empty");
    }
    return std::move(r->bytes);
  }

  const std::vector<Reader> readers_;
  const BatchOptions options_;
  const BatchMode mode_;
  const uint32_t max_dispatchers_;
  mutable Mutex mu_;
  CondVar cv_;
  std::deque<Request> pending_ GUARDED_BY(mu_);
  std::deque<Started> started_ GUARDED_BY(mu_);
  size_t claimed_ GUARDED_BY(mu_) = 0;     // idle dispatchers owed to started_
  bool starting_ GUARDED_BY(mu_) = false;  // a caller is starting a batch
  std::vector<std::thread> threads_ GUARDED_BY(mu_);
  std::vector<uint64_t> last_batch_of_ GUARDED_BY(mu_);  // per source
  size_t idle_ GUARDED_BY(mu_) = 0;
  bool serial_busy_ GUARDED_BY(mu_) = false;     // a batch is reading
  bool serial_waiting_ GUARDED_BY(mu_) = false;  // a drained batch waits
  bool stop_ GUARDED_BY(mu_) = false;
  BatchStats stats_ GUARDED_BY(mu_);
};

class BatchedReaderImpl final : public BatchedReader {
 public:
  BatchedReaderImpl(std::shared_ptr<Core> core, std::vector<uint64_t> sizes)
      : core_(std::move(core)), sizes_(std::move(sizes)) {}
  ~BatchedReaderImpl() override { core_->Stop(); }

  void ReadAsync(size_t source, ByteRange range,
                 std::function<void(Result<Slice>)> done) override {
    Status st = Check(source, range);
    if (!st.ok()) {
      core_->Reject();
      done(std::move(st));
      return;
    }
    core_->Enqueue({source, range, std::move(done)});
  }

  size_t source_count() const override { return sizes_.size(); }
  uint64_t size(size_t source) const override {
    return source < sizes_.size() ? sizes_[source] : 0;
  }
  const Reader& reader(size_t source) const override {
    return core_->reader(source);
  }
  BatchStats GetStats() const override { return core_->GetStats(); }

 private:
  Status Check(size_t source, const ByteRange& range) const {
    if (source >= sizes_.size()) {
      return Status::InvalidArgument(
          "source index " + std::to_string(source) +
          " is past the end of a BatchedReader over " +
          std::to_string(sizes_.size()) + " sources");
    }
    const std::string& name = core_->reader(source).source()->name();
    if (range.length > UINT64_MAX - range.offset) {
      return Status::InvalidArgument(
          "range offset " + std::to_string(range.offset) + " + length " +
          std::to_string(range.length) + " of '" + name +
          "' overflows 64 bits");
    }
    return range.CheckWithin(sizes_[source], name);
  }

  const std::shared_ptr<Core> core_;
  const std::vector<uint64_t> sizes_;
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
  return Status::OK();
}

Result<std::shared_ptr<BatchedReader>> BatchedReader::Open(
    Reader reader, const BatchOptions& options) {
  std::vector<Reader> readers;
  readers.push_back(std::move(reader));
  return Open(std::move(readers), options);
}

Result<std::shared_ptr<BatchedReader>> BatchedReader::Open(
    std::vector<Reader> readers, const BatchOptions& options) {
  return detail::OpenBatchedReader(std::move(readers), options,
                                   BatchMode::kDispatched);
}

Result<std::shared_ptr<BatchedReader>> detail::OpenBatchedReader(
    std::vector<Reader> readers, const BatchOptions& options, BatchMode mode) {
  RANGEIO_RETURN_NOT_OK(options.Validate());
  if (readers.empty()) {
    return Status::InvalidArgument("BatchedReader::Open: no source given");
  }
  std::vector<uint64_t> sizes;
  sizes.reserve(readers.size());
  std::vector<const Limiter*> limiters;
  uint64_t concurrency = 0;
  for (size_t i = 0; i < readers.size(); ++i) {
    Result<uint64_t> size = readers[i].source()->Size();
    if (!size.ok()) {
      return size.status().WithContext("BatchedReader::Open: source " +
                                       std::to_string(i));
    }
    sizes.push_back(*size);
    const Limiter* l = readers[i].limiter().get();
    if (std::find(limiters.begin(), limiters.end(), l) == limiters.end()) {
      limiters.push_back(l);
      concurrency += l->io_concurrency();
    }
  }
  const uint32_t dispatchers =
      options.max_dispatchers != 0
          ? options.max_dispatchers
          : static_cast<uint32_t>(std::min<uint64_t>(concurrency, 4096));
  auto core =
      std::make_shared<Core>(std::move(readers), options, mode, dispatchers);
  return std::shared_ptr<BatchedReader>(
      std::make_shared<BatchedReaderImpl>(std::move(core), std::move(sizes)));
}

Result<Slice> BatchedReader::Read(size_t source, ByteRange range) {
  return ReadFuture(source, range).get();
}

std::future<Result<Slice>> BatchedReader::ReadFuture(size_t source,
                                                     ByteRange range) {
  auto promise = std::make_shared<std::promise<Result<Slice>>>();
  std::future<Result<Slice>> f = promise->get_future();
  ReadAsync(source, range,
            [promise](Result<Slice> r) { promise->set_value(std::move(r)); });
  return f;
}

Result<BlobHandle> BatchedReader::Blob(size_t source, uint64_t offset,
                                       uint64_t size) {
  if (source >= source_count()) {
    return Status::InvalidArgument(
        "blob of source index " + std::to_string(source) +
        ": a BatchedReader over " + std::to_string(source_count()) +
        " sources has none");
  }
  if (size > UINT64_MAX - offset || offset + size > this->size(source)) {
    return Status::InvalidArgument(
        "blob at offset " + std::to_string(offset) + " of " +
        std::to_string(size) + " bytes does not lie within '" +
        reader(source).source()->name() + "' (" +
        std::to_string(this->size(source)) + " bytes)");
  }
  return BlobHandle(shared_from_this(), source, offset, size);
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
        object_->reader(source_).source()->name() + "' (" +
        std::to_string(size_) + " bytes)"));
    return;
  }
  object_->ReadAsync(source_, {offset_ + range.offset, range.length},
                     std::move(done));
}

}  // namespace rangeio
