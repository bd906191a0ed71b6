// reader.cc — the public facade: RangeStream forwards to the stream behind
// it (src/stream/), Reader validates a request and starts that stream.
#include "rangeio/reader.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "util/buffer_pool.h"
#include "limiter/limiter_core.h"
#include "rangeio/local_file.h"
#include "rangeio/planner.h"
#include "util/stats_recorder.h"
#include "stream/plan_map.h"
#include "stream/planned_stream.h"
#include "stream/scheduler.h"
#include "stream/stream_base.h"
#include "stream/waker.h"
#include "stream/hedge_policy.h"

namespace rangeio {

RangeStream::RangeStream(std::shared_ptr<detail::StreamBase> state)
    : state_(std::move(state)) {}
RangeStream::RangeStream(RangeStream&&) noexcept = default;
RangeStream& RangeStream::operator=(RangeStream&& other) noexcept {
  if (this != &other) {
    Cancel();
    state_ = std::move(other.state_);
  }
  return *this;
}
RangeStream::~RangeStream() { Cancel(); }

Result<std::optional<RangeResult>> RangeStream::Next() {
  if (!state_) return Status::Cancelled("stream was moved from");
  return state_->Next();
}

namespace detail {

void StreamAccess::SetWaker(RangeStream& stream, std::shared_ptr<Waker> waker) {
  if (stream.state_) stream.state_->SetWaker(std::move(waker));
}

Result<std::optional<RangeResult>> StreamAccess::Poll(RangeStream& stream,
                                                      bool* pending) {
  if (!stream.state_) return Status::Cancelled("stream was moved from");
  return stream.state_->Poll(pending);
}

}  // namespace detail

void RangeStream::Cancel() {
  if (state_) state_->Finish();
}

size_t RangeStream::size() const { return state_ ? state_->size() : 0; }

namespace {

// The limiter fields of `o` that differ from their defaults, as "key=value".
std::string ChangedLimiterKeys(const LimiterOptions& o) {
  const LimiterOptions d;
  std::string out;
  auto add = [&out](const char* key, uint64_t v) {
    out += (out.empty() ? "" : ", ") + std::string(key) + "=" +
           std::to_string(v);
  };
  if (o.io_concurrency != d.io_concurrency) {
    add("io-concurrency", o.io_concurrency);
  }
  if (o.response_budget_count != d.response_budget_count) {
    add("response-budget-count", o.response_budget_count);
  }
  if (o.response_budget_bytes != d.response_budget_bytes) {
    add("response-budget-bytes", o.response_budget_bytes);
  }
  if (o.hedge_reserve != d.hedge_reserve) {
    add("hedge-reserve", o.hedge_reserve);
  }
  return out;
}

}  // namespace

Result<Reader> Reader::Open(std::shared_ptr<Source> source,
                            const Options& options,
                            std::shared_ptr<Limiter> limiter) {
  RANGEIO_RETURN_NOT_OK(options.Validate());
  if (!limiter) {
    RANGEIO_ASSIGN_OR_RETURN(limiter, Limiter::Make(options));
  } else if (!(options.limiter == LimiterOptions())) {
    return Status::InvalidArgument(
        "Reader::Open: " + ChangedLimiterKeys(options.limiter) +
        " set for a reader that shares a limiter: these are the limiter's "
        "options; set them where the Limiter is made");
  }
  return Open(std::move(source), options.reader, std::move(limiter));
}

Result<Reader> Reader::Open(std::shared_ptr<Source> source,
                            const ReaderOptions& options,
                            std::shared_ptr<Limiter> limiter) {
  if (!source) return Status::InvalidArgument("Reader::Open: source is null");
  if (!limiter) {
    return Status::InvalidArgument("Reader::Open: limiter is null");
  }
  RANGEIO_RETURN_NOT_OK(options.Validate());
  Reader r;
  r.source_ = std::move(source);
  r.limiter_ = std::move(limiter);
  r.stats_ = std::make_shared<detail::StatsRecorder>();
  r.options_ = options;
  if (options.hedge != ReaderOptions::Hedge::kOff) {
    r.hedge_ = std::make_shared<detail::HedgePolicy>(options);
  }
  return r;
}

Result<Reader> Reader::OpenUrl(std::string_view url_or_path,
                               const Options& options,
                               SourceOptions source_options,
                               std::shared_ptr<Limiter> limiter) {
  RANGEIO_RETURN_NOT_OK(options.Validate());
  if (!source_options.local.threads) {
    source_options.local.threads =
        limiter ? limiter->io_concurrency() : options.limiter.io_concurrency;
  }
  RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<Source> source,
                           OpenSource(url_or_path, source_options));
  return Open(std::move(source), options, std::move(limiter));
}

Reader Reader::Clone() const { return *this; }

namespace detail {

// Reader's privates for the stream builder.
struct ReaderAccess {
  static Result<RangeStream> ReadRanges(const Reader& reader,
                                        std::span<const ByteRange> ranges,
                                        Delivery delivery, Priority priority);
};

namespace {

// Every range lies within the source (of `size` bytes), its end fits in
// 64 bits, and it fits in memory: a range is read into one buffer, so one
// longer than the machine's memory (a hostile server's size, a wrong size
// hint) could only end in an allocation failure.
Status CheckRanges(std::span<const ByteRange> ranges, uint64_t size,
                   const std::string& name) {
  const uint64_t max_bytes = MaxBufferBytes();
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (ranges[i].length > max_bytes) {
      return Status::ResourceExhausted(
          "range " + std::to_string(i) + " of '" + name + "' " +
          ranges[i].ToString() + " is " + std::to_string(ranges[i].length) +
          " bytes, more than one buffer can hold on this machine (" +
          std::to_string(max_bytes) +
          " bytes, its physical memory): split it into smaller ranges");
    }
    if (ranges[i].length > UINT64_MAX - ranges[i].offset) {
      return Status::InvalidArgument(
          "range " + std::to_string(i) + " of '" + name + "': offset " +
          std::to_string(ranges[i].offset) + " + length " +
          std::to_string(ranges[i].length) + " overflows 64 bits");
    }
    Status st = ranges[i].CheckWithin(size, name);
    if (!st.ok()) {
      return st.WithContext("request index " + std::to_string(i));
    }
  }
  return Status::OK();
}

}  // namespace

Result<RangeStream> ReaderAccess::ReadRanges(const Reader& reader,
                                             std::span<const ByteRange> ranges,
                                             Delivery delivery,
                                             Priority priority) {
  const std::shared_ptr<Source>& source = reader.source_;
  RANGEIO_ASSIGN_OR_RETURN(const uint64_t size, source->Size());
  RANGEIO_RETURN_NOT_OK(CheckRanges(ranges, size, source->name()));
  const PlannerOptions planner = reader.options_.planner
                                     ? *reader.options_.planner
                                     : source->Info().planner;
  const std::shared_ptr<LimiterCore>& core =
      LimiterAccess::Core(*reader.limiter_);
  // Ranges the source holds in memory are handed out with no read at all.
  std::vector<std::optional<Slice>> hits;
  const size_t n_hits = source->ReadCached(ranges, &hits);
  if (n_hits == 0 && !planner.coalesce &&
      planner.split_bytes == PlannerOptions::kNoSplit) {
    // Nothing to plan: each range is one read, as requested.
    auto state = std::make_shared<Scheduler>(
        source, core, reader.stats_,
        std::vector<ByteRange>(ranges.begin(), ranges.end()), delivery,
        reader.options_, reader.hedge_);
    state->SetHighPriority(priority == Priority::kHigh);
    state->Start();
    return RangeStream(std::move(state));
  }
  RANGEIO_ASSIGN_OR_RETURN(
      std::shared_ptr<const PlanMap> map,
      MakePlanMap(ranges, hits, planner, delivery, core->budget_count(),
                  core->budget_bytes(), source->name()));
  std::vector<ByteRange> reads;
  reads.reserve(map->plan.reads.size());
  for (const PhysicalRead& r : map->plan.reads) reads.push_back(r.range());
  auto physical = std::make_shared<Scheduler>(
      source, core, reader.stats_, std::move(reads), delivery, reader.options_,
      reader.hedge_, [map](uint64_t p) { return map->Describe(p); });
  physical->SetHighPriority(priority == Priority::kHigh);
  auto planned = std::make_shared<PlannedStream>(map, std::move(hits), delivery,
                                                 reader.stats_, core);
  planned->Start(std::move(physical));
  return RangeStream(std::move(planned));
}

}  // namespace detail

Result<RangeStream> Reader::ReadRanges(std::span<const ByteRange> ranges,
                                       Delivery delivery,
                                       Priority priority) const {
  return detail::ReaderAccess::ReadRanges(*this, ranges, delivery, priority);
}

Stats Reader::GetStats() const { return stats_->Snapshot(); }

}  // namespace rangeio
