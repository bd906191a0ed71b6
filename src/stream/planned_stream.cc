#include "stream/planned_stream.h"

#include <cstring>
#include <utility>

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

}  // namespace

PlannedStream::PlannedStream(std::shared_ptr<const PlanMap> map,
                             std::vector<std::optional<Slice>> hits,
                             Delivery delivery,
                             std::shared_ptr<StatsRecorder> stats,
                             std::shared_ptr<LimiterCore> limiter)
    : map_(std::move(map)),
      hits_(std::move(hits)),
      delivery_(delivery),
      stats_(std::move(stats)),
      limiter_(std::move(limiter)),
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

// Hands out a complete range if there is one; otherwise takes the next
// physical result (waiting for it unless `pending` is set).
Result<std::optional<RangeResult>> PlannedStream::Poll(bool* pending) {
  if (!status_.ok()) return status_;
  for (;;) {
    if (delivered_ == map_->ranges.size()) return End();
    if (std::optional<uint64_t> i = NextReady()) {
      return std::optional<RangeResult>(Deliver(*i));
    }
    Flush();  // the consumer is about to wait: bring stats up to date
    bool physical_pending = false;
    Result<std::optional<RawResult>> raw =
        physical_->NextRaw(pending ? &physical_pending : nullptr);
    if (!raw.ok()) return Fail(raw.status());
    if (physical_pending) {
      *pending = true;
      return std::optional<RangeResult>();
    }
    if (!*raw) {
      return Fail(Status::Internal(
          "rangeio: the physical reads of '" + map_->source_name +
          "' ended before request index " + std::to_string(delivered_) +
          " was complete (plan accounting is broken)"));
    }
    Arrive(std::move(**raw));
  }
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
  Flush();
  return std::optional<RangeResult>();
}

void PlannedStream::Finish() {
  if (physical_) physical_->Finish();
  for (std::shared_ptr<Lease>& l : held_) l.reset();
  hits_.clear();
  ready_.clear();
  Flush();
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

// Holds physical read r until the ranges it serves are handed out.
void PlannedStream::Arrive(RawResult r) {
  const uint64_t p = r.index;
  held_[p] = std::move(r.lease);
  for (uint64_t k = map_->user_begin[p]; k < map_->user_begin[p + 1]; ++k) {
    const uint64_t i = map_->users[k];
    if (--missing_[i] == 0 && delivery_ == Delivery::kAsCompleted) {
      ready_.push_back(i);
    }
  }
}

RangeResult PlannedStream::Deliver(uint64_t i) {
  const RangeLocation& loc = map_->plan.locations[i];
  ++delivered_;
  ++unflushed_;
  unflushed_bytes_ += loc.length;
  if (unflushed_ >= kFlushEvery) Flush();
  if (loc.read_count == 0) {
    // A hit, or an empty range.
    if (!hits_.empty() && hits_[i]) return {i, *std::exchange(hits_[i], {})};
    return {i, Slice()};
  }
  if (loc.read_count == 1) {
    const std::shared_ptr<Lease>& lease = held_[loc.read];
    Slice s(lease, lease->bytes.data() + loc.offset, loc.length);
    Done(loc.read);
    return {i, std::move(s)};
  }
  return {i, Assemble(i, loc)};
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
