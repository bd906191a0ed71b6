// reader.cc — the public facade: RangeStream forwards to the stream behind
// it (src/stream/), Reader opens, starts streams (stream_builder.h) and
// drains them for the one-call forms.
#include "rangeio/reader.h"

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "limiter/limiter_core.h"
#include "stream/hedge_policy.h"
#include "stream/stream_base.h"
#include "stream/stream_builder.h"
#include "util/stats_recorder.h"

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
  return state_->Poll(nullptr);
}

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
    out +=
        (out.empty() ? "" : ", ") + std::string(key) + "=" + std::to_string(v);
  };
  if (o.io_concurrency != d.io_concurrency) {
    add("io-concurrency (alias read-thread-num)", o.io_concurrency);
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
  // A source that joins concurrent reads of the same bytes (a BlockCache)
  // makes a hedge's second copy wait for the first: never hedged (its
  // Info().description says so).
  if (options.hedge != ReaderOptions::Hedge::kOff &&
      !r.source_->Info().joins_concurrent_reads) {
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
                                        const ReadOptions& options,
                                        bool whole) {
    const ReaderParts parts{reader.source_,
                            LimiterAccess::Core(*reader.limiter_),
                            reader.stats_, &reader.options_, reader.hedge_};
    RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<StreamBase> stream,
                             StartStream(parts, ranges, options, whole));
    return RangeStream(std::move(stream));
  }
  static std::shared_ptr<HedgePolicy> Hedge(const Reader& reader) {
    return reader.hedge_;
  }
};

std::shared_ptr<HedgePolicy> HedgePolicyOf(const Reader& reader) {
  return ReaderAccess::Hedge(reader);
}

}  // namespace detail

Result<RangeStream> Reader::ReadRanges(std::span<const ByteRange> ranges,
                                       const ReadOptions& options) const {
  return detail::ReaderAccess::ReadRanges(*this, ranges, options, false);
}

Result<RangeStream> Reader::ReadRanges(std::span<const ByteRange> ranges,
                                       Delivery delivery,
                                       Priority priority) const {
  ReadOptions o;
  o.delivery = delivery;
  o.priority = priority;
  return ReadRanges(ranges, o);
}

// The one drain loop: every result of `ranges`, as they complete, to
// `take(index, bytes)`; the first error ends it.
template <typename Take>
Status Drain(const Reader& reader, std::span<const ByteRange> ranges,
             Priority priority, bool whole, Take take) {
  ReadOptions o;
  o.delivery = Delivery::kAsCompleted;
  o.priority = priority;
  RANGEIO_ASSIGN_OR_RETURN(RangeStream stream, detail::ReaderAccess::ReadRanges(
                                                   reader, ranges, o, whole));
  for (;;) {
    RANGEIO_ASSIGN_OR_RETURN(std::optional<RangeResult> r, stream.Next());
    if (!r) return Status::OK();
    take(r->index, std::move(r->bytes));
  }
}

Result<std::vector<Slice>> Reader::ReadAll(std::span<const ByteRange> ranges,
                                           Priority priority) const {
  std::vector<Slice> out(ranges.size());
  RANGEIO_RETURN_NOT_OK(
      Drain(*this, ranges, priority, true,
            [&out](size_t i, Slice bytes) { out[i] = std::move(bytes); }));
  return out;
}

Status Reader::ReadInto(std::span<const ByteRange> ranges,
                        std::span<const std::span<std::byte>> buffers,
                        Priority priority) const {
  if (buffers.size() != ranges.size()) {
    return Status::InvalidArgument("ReadInto of '" + source_->name() +
                                   "': " + std::to_string(ranges.size()) +
                                   " ranges but " +
                                   std::to_string(buffers.size()) + " buffers");
  }
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (buffers[i].size() != ranges[i].length) {
      return Status::InvalidArgument(
          "ReadInto of '" + source_->name() + "': buffer " + std::to_string(i) +
          " holds " + std::to_string(buffers[i].size()) + " bytes for range " +
          std::to_string(i) + " of " + std::to_string(ranges[i].length));
    }
  }
  return Drain(*this, ranges, priority, false,
               [&](size_t i, const Slice& bytes) {
                 if (!bytes.empty()) {
                   std::memcpy(buffers[i].data(), bytes.data(), bytes.size());
                 }
               });
}

Result<Slice> Reader::Read(ByteRange range, Priority priority) const {
  RANGEIO_ASSIGN_OR_RETURN(std::vector<Slice> out,
                           ReadAll({&range, 1}, priority));
  return std::move(out[0]);
}

Stats Reader::GetStats() const { return stats_->Snapshot(); }

}  // namespace rangeio
