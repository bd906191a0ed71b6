// BatchedReader (see rangeio/batch.h).
//
// Requests queue in `pending_`. The thread that finds no batch being
// started and fewer than max_batches in progress becomes the starter: it
// takes everything queued (up to max_batch_requests) as one batch, starts
// it, and goes on while requests wait and batches may start. A batch is
// grouped by source; each source's ranges are one pushed stream with
// per-range errors, whose callbacks hand each result to its request's
// callback. When a batch's last stream ends, the thread that ended it
// starts the next batch if requests wait for one.
#include <algorithm>
#include <deque>
#include <optional>
#include <vector>

#include "rangeio/batch.h"
#include "util/mutex.h"

namespace rangeio {
namespace {

using detail::CondVar;
using detail::Mutex;
using detail::MutexLock;

struct Request {
  size_t source;
  ByteRange range;
  std::function<void(Result<Slice>)> done;
};

// Callbacks of any BatchedReader running on this thread: destroying the
// last handle there must not wait for the requests in progress, which may
// need this very thread to complete.
thread_local int tls_in_callback = 0;

void Call(Request& r, Result<Slice> result) {
  ++tls_in_callback;
  r.done(std::move(result));
  --tls_in_callback;
}

class Core;

// One source's share of a batch: its requests (indexes into the batch, in
// arrival order) and the stream reading them.
struct Group {
  size_t source = 0;
  std::vector<size_t> members;
  std::vector<bool> delivered;  // by the group's callbacks (never at once)
  std::optional<RangeStream> stream;  // guarded by Batch::mu
  bool ended = false;                 // guarded by Batch::mu
};

// A batch in progress; its groups' callbacks hold it.
struct Batch {
  std::shared_ptr<Core> core;
  std::vector<Request> requests;
  std::vector<Group> groups;
  Mutex mu;
  size_t groups_left GUARDED_BY(mu) = 0;
};

class Core : public std::enable_shared_from_this<Core> {
 public:
  Core(std::vector<Reader> readers, BatchOptions options, uint32_t max_batches)
      : readers_(std::move(readers)),
        options_(options),
        max_batches_(max_batches),
        last_batch_of_(readers_.size(), 0) {}

  void Enqueue(Request r) EXCLUDES(mu_) {
    MutexLock lk(mu_);
    ++stats_.requests;
    pending_.push_back(std::move(r));
    StartBatchesLocked();
  }

  void Reject() EXCLUDES(mu_) {
    MutexLock lk(mu_);
    ++stats_.requests;
    ++stats_.rejected;
  }

  // A batch's last stream ended: its place goes to the requests waiting.
  void BatchDone() EXCLUDES(mu_) {
    MutexLock lk(mu_);
    --running_;
    StartBatchesLocked();
    cv_.NotifyAll();
  }

  // Waits for every request to complete (not inside a callback: see
  // tls_in_callback).
  void Stop() EXCLUDES(mu_) {
    if (tls_in_callback > 0) return;
    MutexLock lk(mu_);
    while (running_ > 0 || !pending_.empty()) cv_.Wait(lk);
  }

  BatchStats GetStats() const EXCLUDES(mu_) {
    MutexLock lk(mu_);
    return stats_;
  }
  const Reader& reader(size_t source) const { return readers_[source]; }
  size_t source_count() const { return readers_.size(); }

 private:
  // Starts batches while requests wait and a place is free; one starter at
  // a time (the others' requests join its next batch).
  void StartBatchesLocked() REQUIRES(mu_) {
    if (starting_) return;
    starting_ = true;
    while (!pending_.empty() && running_ < max_batches_) {
      auto batch = std::make_shared<Batch>();
      batch->core = shared_from_this();
      batch->requests = TakeBatchLocked();
      ++running_;
      mu_.Unlock();
      Start(batch);
      mu_.Lock();
    }
    starting_ = false;
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
        groups.emplace_back();
        groups.back().source = batch[i].source;
      }
      groups.back().members.push_back(i);
    }
    for (Group& g : groups) g.delivered.assign(g.members.size(), false);
    return groups;
  }

  // Starts every source's stream of the batch.
  void Start(const std::shared_ptr<Batch>& batch) {
    batch->groups = GroupBySource(batch->requests);
    {
      MutexLock lk(batch->mu);
      batch->groups_left = batch->groups.size();
    }
    for (size_t k = 0; k < batch->groups.size(); ++k) StartGroup(batch, k);
  }

  void StartGroup(const std::shared_ptr<Batch>& batch, size_t k) {
    Group& g = batch->groups[k];
    std::vector<ByteRange> ranges;
    ranges.reserve(g.members.size());
    for (size_t i : g.members) ranges.push_back(batch->requests[i].range);
    ReadOptions o;
    o.delivery = Delivery::kAsCompleted;
    o.per_range_errors = true;
    o.on_result = [batch, k](RangeResult r) {
      Group& group = batch->groups[k];
      group.delivered[r.index] = true;
      Request& req = batch->requests[group.members[r.index]];
      Call(req, r.status.ok() ? Result<Slice>(std::move(r.bytes))
                              : Result<Slice>(std::move(r.status)));
    };
    o.on_end = [batch, k](const Status& st) { GroupEnded(batch, k, st); };
    Result<RangeStream> stream = readers_[g.source].ReadRanges(ranges, o);
    if (!stream.ok()) {
      GroupEnded(batch, k, stream.status());
      return;
    }
    std::optional<RangeStream> late;  // ended before ReadRanges returned
    {
      MutexLock lk(batch->mu);
      if (g.ended) {
        late.emplace(std::move(*stream));
      } else {
        g.stream.emplace(std::move(*stream));
      }
    }
  }

  // A group's stream ended: requests it did not deliver get its error (a
  // stall, or the error that refused the stream before any I/O).
  static void GroupEnded(const std::shared_ptr<Batch>& batch, size_t k,
                         const Status& st) {
    Group& g = batch->groups[k];
    for (size_t j = 0; j < g.members.size(); ++j) {
      if (g.delivered[j]) continue;
      g.delivered[j] = true;
      Call(batch->requests[g.members[j]],
           st.ok() ? Status::Internal(
                         "rangeio: a batch's stream of '" +
                         batch->core->reader(g.source).source()->name() +
                         "' ended without this range")
                   : st);
    }
    std::optional<RangeStream> ended;  // dropped last, outside the lock
    bool last = false;
    {
      MutexLock lk(batch->mu);
      g.ended = true;
      if (g.stream) ended.emplace(std::move(*g.stream));
      g.stream.reset();
      last = --batch->groups_left == 0;
    }
    if (last) batch->core->BatchDone();
  }

  const std::vector<Reader> readers_;
  const BatchOptions options_;
  const uint32_t max_batches_;
  mutable Mutex mu_;
  CondVar cv_;
  std::deque<Request> pending_ GUARDED_BY(mu_);
  uint32_t running_ GUARDED_BY(mu_) = 0;  // batches started, not yet ended
  bool starting_ GUARDED_BY(mu_) = false;
  std::vector<uint64_t> last_batch_of_ GUARDED_BY(mu_);  // per source
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
    return CheckRange(range, sizes_[source],
                      core_->reader(source).source()->name());
  }

  const std::shared_ptr<Core> core_;
  const std::vector<uint64_t> sizes_;
};

// A blocking wait on an asynchronous read: a callback that fulfils a
// promise.
template <typename Start>
Result<Slice> Wait(Start start) {
  auto promise = std::make_shared<std::promise<Result<Slice>>>();
  std::future<Result<Slice>> f = promise->get_future();
  start([promise](Result<Slice> r) { promise->set_value(std::move(r)); });
  return f.get();
}

}  // namespace

Status BatchOptions::Validate() const {
  if (max_batches > 4096) {
    return Status::InvalidArgument(
        "BatchOptions.max_batches=" + std::to_string(max_batches) +
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
  const uint32_t max_batches =
      options.max_batches != 0
          ? options.max_batches
          : static_cast<uint32_t>(std::min<uint64_t>(concurrency, 4096));
  auto core = std::make_shared<Core>(std::move(readers), options, max_batches);
  return std::shared_ptr<BatchedReader>(
      std::make_shared<BatchedReaderImpl>(std::move(core), std::move(sizes)));
}

Result<Slice> BatchedReader::Read(size_t source, ByteRange range) {
  return Wait([&](auto done) { ReadAsync(source, range, std::move(done)); });
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
  return Wait([&](auto done) { ReadAsync(range, std::move(done)); });
}

void BlobHandle::ReadAsync(ByteRange range,
                           std::function<void(Result<Slice>)> done) const {
  Status st = CheckRange(range, size_,
                         "blob [" + std::to_string(offset_) + ", " +
                             std::to_string(offset_ + size_) + ") of " +
                             object_->reader(source_).source()->name());
  if (!st.ok()) {
    done(std::move(st));
    return;
  }
  object_->ReadAsync(source_, {offset_ + range.offset, range.length},
                     std::move(done));
}

}  // namespace rangeio
