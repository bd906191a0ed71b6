#include "stream/planned_stream.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "util/clock.h"

namespace rangeio::detail {
namespace {

// A range spanning several reads of a split, copied together once. It keeps
// the parts' leases, so their budget stays held until this range is
// released; a part no other range needs has its buffer freed at once.
struct AssembledRange {
  Slice bytes;
  std::vector<std::shared_ptr<Lease>> parts;
};

// Deliveries counted before they are flushed to the stats.
constexpr uint64_t kFlushEvery = 64;

// How long a pull consumer of several streams sleeps at most when none has
// changed: only so that a stalled stream's deadline is checked.
constexpr std::chrono::milliseconds kRecheck{50};

Slice SliceOf(const std::shared_ptr<Lease>& lease) {
  return Slice(lease, lease->bytes.data(), lease->bytes.size());
}

}  // namespace

PlannedStream::PlannedStream(std::shared_ptr<const PlanMap> map,
                             std::vector<std::optional<Slice>> hits,
                             Delivery delivery,
                             std::shared_ptr<StatsRecorder> stats,
                             std::shared_ptr<LimiterCore> limiter,
                             RetryFactory retry)
    : map_(std::move(map)),
      hits_(std::move(hits)),
      delivery_(delivery),
      stats_(std::move(stats)),
      limiter_(std::move(limiter)),
      retry_(std::move(retry)),
      held_(map_->plan.reads.size()),
      needs_(map_->plan.reads.size()),
      missing_(map_->ranges.size()) {
  for (size_t p = 0; p < needs_.size(); ++p) {
    needs_[p] = map_->user_begin[p + 1] - map_->user_begin[p];
  }
  for (size_t i = 0; i < missing_.size(); ++i) {
    missing_[i] = map_->plan.locations[i].read_count;
    if (missing_[i] == 0 && delivery_ == Delivery::kAsCompleted) {
      ready_.push_back(i);
    }
  }
}

void PlannedStream::Start(std::shared_ptr<Scheduler> physical) {
  physical_ = std::move(physical);
  physical_->Start();
}

void PlannedStream::SetListener(std::shared_ptr<StreamListener> listener) {
  listener_ = std::move(listener);
  physical_->SetListener(listener_);
  for (Retry& r : retries_) r.stream->SetListener(listener_);
}

uint64_t PlannedStream::RecheckAt() const {
  uint64_t at = physical_done_ ? 0 : physical_->RecheckAt();
  for (const Retry& r : retries_) {
    const uint64_t t = r.done ? 0 : r.stream->RecheckAt();
    if (t != 0 && (at == 0 || t < at)) at = t;
  }
  return at;
}

// Hands out a complete range if there is one; otherwise takes the next
// physical result (waiting for it unless `pending` is set). While failed
// reads are re-read, every stream is polled and a pull consumer waits on
// the Waker they share.
Result<std::optional<RangeResult>> PlannedStream::Poll(bool* pending) {
  if (!status_.ok()) return status_;
  for (;;) {
    if (delivered_ == map_->ranges.size()) return End();
    if (std::optional<uint64_t> i = NextReady()) {
      return std::optional<RangeResult>(Deliver(*i));
    }
    Flush();  // the consumer is about to wait: bring stats up to date
    if (retries_.empty()) {
      bool physical_pending = false;
      RANGEIO_RETURN_NOT_OK(PollOne(pending ? &physical_pending : nullptr));
      if (physical_pending) {
        *pending = true;
        return std::optional<RangeResult>();
      }
      continue;
    }
    const uint64_t seen = waker_ ? waker_->changes() : 0;
    if (PollAll()) continue;
    if (!status_.ok()) return status_;
    if (pending || !waker_) {
      if (pending) *pending = true;
      return std::optional<RangeResult>();
    }
    waker_->WaitForChange(seen, kRecheck);
  }
}

// The physical stream's next result, filed (waiting for it without
// `pending`).
Status PlannedStream::PollOne(bool* pending) {
  Result<std::optional<RawResult>> raw = physical_->NextRaw(pending);
  if (!raw.ok()) return Fail(raw.status());
  if (pending && *pending) return Status::OK();
  if (!*raw) {
    return Fail(Status::Internal(
        "rangeio: the physical reads of '" + map_->source_name +
        "' ended before request index " + std::to_string(delivered_) +
        " was complete (plan accounting is broken)"));
  }
  Arrive(std::move(**raw));
  return Status::OK();
}

// Takes whatever the physical stream and the retries have ready, without
// waiting; true when anything arrived.
bool PlannedStream::PollAll() {
  bool progress = false;
  while (!physical_done_ && status_.ok()) {
    bool pending = false;
    Result<std::optional<RawResult>> raw = physical_->NextRaw(&pending);
    if (!raw.ok()) {
      (void)Fail(raw.status());
      return false;
    }
    if (pending) break;
    if (!*raw) {
      physical_done_ = true;
      break;
    }
    Arrive(std::move(**raw));
    progress = true;
  }
  for (size_t k = 0; k < retries_.size() && status_.ok(); ++k) {
    while (!retries_[k].done) {
      bool pending = false;
      Result<std::optional<RawResult>> raw =
          retries_[k].stream->NextRaw(&pending);
      if (!raw.ok()) {
        (void)Fail(raw.status());
        return false;
      }
      if (pending) break;
      if (!*raw) {
        retries_[k].done = true;
        break;
      }
      Retried(retries_[k], std::move(**raw));  // may add to retries_
      progress = true;
    }
  }
  return progress;
}

// Every range is delivered. Every read was needed by some range, so the
// physical stream is at its end too; reading its end lets it finish its
// stats and let go.
Result<std::optional<RangeResult>> PlannedStream::End() {
  if (!physical_done_) {
    Result<std::optional<RawResult>> end = physical_->NextRaw();
    if (!end.ok()) return Fail(end.status());
    if (*end) {
      return Fail(
          Status::Internal("rangeio: a read of '" + map_->source_name +
                           "' was left over after every range was delivered"));
    }
    physical_done_ = true;
  }
  for (Retry& r : retries_) {
    if (r.done) continue;
    Result<std::optional<RawResult>> end = r.stream->NextRaw();
    if (!end.ok()) return Fail(end.status());
    r.done = true;
  }
  Flush();
  return std::optional<RangeResult>();
}

void PlannedStream::Finish() {
  if (physical_) physical_->Finish();
  for (Retry& r : retries_) r.stream->Finish();
  for (std::shared_ptr<Lease>& l : held_) l.reset();
  hits_.clear();
  ready_.clear();
  retried_.clear();
  Flush();
  // The listener (a pushed stream) holds this stream: keeping it would be a
  // cycle that frees neither.
  listener_.reset();
  if (status_.ok() && delivered_ < map_->ranges.size()) {
    status_ = Status::Cancelled("stream over '" + map_->source_name +
                                "' was cancelled");
  }
}

Status PlannedStream::Fail(Status st) {
  status_ = std::move(st);
  Finish();
  return status_;
}

std::optional<uint64_t> PlannedStream::NextReady() {
  if (delivery_ == Delivery::kOrdered) {
    if (missing_[delivered_] == 0) return delivered_;
    return std::nullopt;
  }
  if (ready_.empty()) return std::nullopt;
  const uint64_t i = ready_.front();
  ready_.pop_front();
  return i;
}

// Range i has every read it waits for.
void PlannedStream::Complete(uint64_t i) {
  if (--missing_[i] == 0 && delivery_ == Delivery::kAsCompleted) {
    ready_.push_back(i);
  }
}

// Holds physical read p until the ranges it serves are handed out.
void PlannedStream::Arrive(RawResult r) {
  const uint64_t p = r.index;
  if (!r.status.ok()) {
    // The failed read's budget (r.lease) is released after its ranges'
    // retry is queued, with priority, in the limiter: the retry gets it, so
    // it cannot be starved by the results an ordered consumer holds.
    FailRead(p, r.status);
    return;
  }
  held_[p] = std::move(r.lease);
  for (uint64_t k = map_->user_begin[p]; k < map_->user_begin[p + 1]; ++k) {
    Complete(map_->users[k]);
  }
}

// Read p failed (per-range errors). Its one range, or a range it is a part
// of, fails with it; the ranges of a read that served several are read again
// one by one.
void PlannedStream::FailRead(uint64_t p, const Status& error) {
  const uint64_t begin = map_->user_begin[p];
  const uint64_t end = map_->user_begin[p + 1];
  std::vector<uint64_t> again;
  for (uint64_t k = begin; k < end; ++k) {
    const uint64_t i = map_->users[k];
    if (end - begin > 1 && map_->plan.locations[i].read_count == 1) {
      again.push_back(i);
      continue;
    }
    failed_.try_emplace(i, error);
    Complete(i);
  }
  if (!again.empty()) StartRetry(std::move(again));
}

void PlannedStream::StartRetry(std::vector<uint64_t> ranges) {
  std::vector<ByteRange> reads;
  reads.reserve(ranges.size());
  for (uint64_t i : ranges) reads.push_back(map_->ranges[i]);
  stats_->RecordRetried(ranges.size());
  limiter_->RecordRetried(ranges.size());
  auto map = map_;
  auto describe = [map, ranges](uint64_t k) {
    return "reading range " + map->ranges[ranges[k]].ToString() +
           " (request index " + std::to_string(ranges[k]) + ") of '" +
           map->source_name + "' alone, after the read it shared failed";
  };
  Retry retry{retry_(std::move(reads), std::move(describe)), std::move(ranges)};
  if (!listener_) {
    if (!waker_) {
      waker_ = std::make_shared<Waker>();
      physical_->SetListener(waker_);
    }
    retry.stream->SetListener(waker_);
  } else {
    retry.stream->SetListener(listener_);
  }
  retries_.push_back(std::move(retry));
  retries_.back().stream->Start();
}

// A range read again alone came back, with its bytes or its own error.
void PlannedStream::Retried(const Retry& retry, RawResult r) {
  const uint64_t i = retry.ranges[r.index];
  if (r.status.ok()) {
    retried_.emplace(i, SliceOf(r.lease));
  } else {
    failed_.emplace(i, std::move(r.status));
  }
  Complete(i);
}

RangeResult PlannedStream::Deliver(uint64_t i) {
  const RangeLocation& loc = map_->plan.locations[i];
  ++delivered_;
  ++unflushed_;
  if (unflushed_ >= kFlushEvery) Flush();
  if (!failed_.empty() || !retried_.empty()) {
    std::optional<RangeResult> out;
    if (auto f = failed_.find(i); f != failed_.end()) {
      out = RangeResult{i, Slice(), std::move(f->second)};
      failed_.erase(f);
    } else if (auto s = retried_.find(i); s != retried_.end()) {
      unflushed_bytes_ += loc.length;
      out = RangeResult{i, std::move(s->second), Status::OK()};
      retried_.erase(s);
    }
    if (out) {
      for (size_t p = loc.read; p < loc.read + loc.read_count; ++p) Done(p);
      return std::move(*out);
    }
  }
  unflushed_bytes_ += loc.length;
  if (loc.read_count == 0) {
    // A hit, or an empty range.
    if (!hits_.empty() && hits_[i]) {
      return {i, *std::exchange(hits_[i], {}), {}};
    }
    return {i, Slice(), {}};
  }
  if (loc.read_count == 1) {
    const std::shared_ptr<Lease>& lease = held_[loc.read];
    Slice s(lease, lease->bytes.data() + loc.offset, loc.length);
    Done(loc.read);
    return {i, std::move(s), {}};
  }
  return {i, Assemble(i, loc), {}};
}

// Range i no longer needs read p; its buffer goes when no range does.
void PlannedStream::Done(uint64_t p) {
  if (--needs_[p] == 0) held_[p].reset();
}

Slice PlannedStream::Assemble(uint64_t i, const RangeLocation& loc) {
  auto out = std::make_shared<AssembledRange>();
  std::byte* dst = nullptr;
  out->bytes = Slice::Allocate(loc.length, &dst);
  for (const RangePart& part : map_->plan.Parts(i)) {
    std::memcpy(dst + part.offset_in_range,
                held_[part.read]->bytes.data() + part.offset_in_read,
                part.length);
  }
  for (size_t p = loc.read; p < loc.read + loc.read_count; ++p) {
    std::shared_ptr<Lease> part = held_[p];
    if (--needs_[p] == 0) {
      held_[p].reset();
      // Nothing else refers to the part: free its bytes now; its budget
      // stays with the assembled range.
      if (part.use_count() == 1) part->bytes.Reset();
    }
    out->parts.push_back(std::move(part));
  }
  const std::byte* data = out->bytes.data();
  return Slice(std::move(out), data, loc.length);
}

void PlannedStream::Flush() {
  if (unflushed_ == 0) return;
  stats_->RecordDelivered(unflushed_, unflushed_bytes_, 0);
  limiter_->RecordDelivered(unflushed_, unflushed_bytes_, 0);
  unflushed_ = 0;
  unflushed_bytes_ = 0;
}

}  // namespace rangeio::detail
