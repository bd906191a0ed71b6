#include "stream/stream_builder.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "stream/plan_map.h"
#include "stream/planned_stream.h"
#include "stream/push_stream.h"
#include "stream/scheduler.h"

namespace rangeio::detail {
namespace {

SchedulerConfig ConfigOf(const ReaderParts& reader, const ReadOptions& o) {
  SchedulerConfig c;
  c.delivery = o.delivery;
  c.priority = o.priority;
  c.stall_timeout = reader.options->response_stall_timeout;
  c.per_range_errors = o.per_range_errors;
  c.hedge = reader.hedge;
  return c;
}

// ReadAll holds every result until the last: its reads (`count` of them,
// `bytes` in all) must fit in the response budget at once. A single read
// larger than the byte budget is admitted alone, so it fits.
Status CheckWhole(const LimiterCore& limiter, uint64_t count, uint64_t bytes,
                  size_t ranges, const std::string& name) {
  const bool fits = count <= limiter.budget_count() &&
                    (bytes <= limiter.budget_bytes() || count <= 1);
  if (fits) return Status::OK();
  return Status::ResourceExhausted(
      "ReadAll of " + std::to_string(ranges) + " ranges of '" + name +
      "' holds " + std::to_string(count) + " reads of " +
      std::to_string(bytes) +
      " bytes at once, more than the limiter's response budget (" +
      std::to_string(limiter.budget_count()) + " responses, " +
      std::to_string(limiter.budget_bytes()) +
      " bytes): read them with ReadInto (into your buffers) or ReadRanges "
      "(streamed), or raise response-budget-count / response-budget-bytes");
}

// Each range one read, as requested: no plan.
Result<std::shared_ptr<StreamBase>> StartUnplanned(
    const ReaderParts& reader, std::span<const ByteRange> ranges,
    const ReadOptions& options, bool whole) {
  if (whole) {
    uint64_t count = 0;
    uint64_t bytes = 0;
    for (const ByteRange& r : ranges) {
      count += 1;
      bytes += r.length;
    }
    RANGEIO_RETURN_NOT_OK(CheckWhole(*reader.limiter, count, bytes,
                                     ranges.size(), reader.source->name()));
  }
  auto stream = std::make_shared<Scheduler>(
      reader.source, reader.limiter, reader.stats,
      std::vector<ByteRange>(ranges.begin(), ranges.end()),
      ConfigOf(reader, options));
  stream->Start();
  return std::shared_ptr<StreamBase>(std::move(stream));
}

}  // namespace

Result<std::shared_ptr<StreamBase>> StartStream(
    const ReaderParts& reader, std::span<const ByteRange> ranges,
    const ReadOptions& options, bool whole) {
  Source& source = *reader.source;
  if (options.planner) RANGEIO_RETURN_NOT_OK(options.planner->Validate());
  if (options.on_end && !options.on_result) {
    return Status::InvalidArgument(
        "ReadOptions.on_end is set without on_result: a stream's end goes "
        "to a callback only when its results do");
  }
  RANGEIO_ASSIGN_OR_RETURN(const uint64_t size, source.Size());
  RANGEIO_RETURN_NOT_OK(CheckRanges(ranges, size, source.name()));
  const PlannerOptions planner = options.planner ? *options.planner
                                 : reader.options->planner
                                     ? *reader.options->planner
                                     : source.Info().planner;
  // Ranges the source holds in memory are handed out with no read at all.
  std::vector<std::optional<Slice>> hits;
  const size_t n_hits = source.ReadCached(ranges, &hits);
  std::shared_ptr<StreamBase> stream;
  if (n_hits == 0 && !planner.coalesce &&
      planner.split_bytes == PlannerOptions::kNoSplit) {
    RANGEIO_ASSIGN_OR_RETURN(stream,
                             StartUnplanned(reader, ranges, options, whole));
  } else {
    const LimiterCore& core = *reader.limiter;
    RANGEIO_ASSIGN_OR_RETURN(
        std::shared_ptr<const PlanMap> map,
        MakePlanMap(ranges, hits, planner, options.delivery,
                    options.issue_order, core.budget_count(),
                    core.budget_bytes(), source.name()));
    if (whole) {
      RANGEIO_RETURN_NOT_OK(CheckWhole(core, map->plan.reads.size(),
                                       map->plan.physical_bytes, ranges.size(),
                                       source.name()));
    }
    std::vector<ByteRange> reads;
    reads.reserve(map->plan.reads.size());
    for (const PhysicalRead& r : map->plan.reads) reads.push_back(r.range());
    SchedulerConfig config = ConfigOf(reader, options);
    config.describe = [map](uint64_t p) { return map->Describe(p); };
    auto physical = std::make_shared<Scheduler>(
        reader.source, reader.limiter, reader.stats, std::move(reads), config);
    PlannedStream::RetryFactory retry;
    if (options.per_range_errors) {
      SchedulerConfig again = ConfigOf(reader, options);
      again.delivery = Delivery::kAsCompleted;
      again.priority = Priority::kHigh;
      retry = [source = reader.source, limiter = reader.limiter,
               stats = reader.stats,
               again](std::vector<ByteRange> alone,
                      std::function<std::string(uint64_t)> describe) {
        SchedulerConfig c = again;
        c.describe = std::move(describe);
        return std::make_shared<Scheduler>(source, limiter, stats,
                                           std::move(alone), c);
      };
    }
    auto planned = std::make_shared<PlannedStream>(
        map, std::move(hits), options.delivery, reader.stats, reader.limiter,
        std::move(retry));
    planned->Start(std::move(physical));
    stream = std::move(planned);
  }
  if (!options.on_result) return stream;
  auto push = std::make_shared<PushStream>(std::move(stream), options.on_result,
                                           options.on_end);
  push->Start();
  return std::shared_ptr<StreamBase>(std::move(push));
}

}  // namespace rangeio::detail
