// url_bench.h — `rangeio bench url`: a load generator for ranged reads of
// any object rangeio opens (s3://, http(s)://, file://, a path), what fio is
// for disks and MinIO's warp for S3. Reads of `block` bytes at `concurrency`
// in flight, random (block-aligned, uniform over the object) or sequential,
// for a time or a number of reads, through a Reader on OpenSource(url).
//
// Other rows can run beside it in the same process, on the same sequence of
// ranges (rangeio-bench url --compare adds plain libcurl and the chunk
// barrier): each is a UrlRow, and the rows run round by round in rotating
// order.
//
// Thread-safety: RunUrl runs one row at a time; a row may use threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "rangeio/rangeio.h"
#include "report.h"

namespace rangeio::bench {

struct UrlBenchOptions {
  std::string url;
  uint64_t block = 100 << 10;  // 100 KiB: S3's sweet spot per request
  uint32_t concurrency = 64;   // reads in flight (Options' default)
  double seconds = 0;          // run time; 0 = 10 s unless `reads` is set
  uint64_t reads = 0;          // run this many reads instead of a time
  bool sequential = false;     // false: uniform random block-aligned offsets
  Delivery delivery = Delivery::kAsCompleted;
  int rounds = 1;        // each row this many times, in rotating order
  Options reader;        // -o reader keys (io_concurrency = concurrency)
  SourceOptions source;  // -o source keys
};

// The reads of a run: the same sequence for every row given the same seed.
class RangeGen {
 public:
  RangeGen(uint64_t size, const UrlBenchOptions& o, uint64_t seed);
  // The next range; std::nullopt after `reads` ranges (when set).
  std::optional<ByteRange> Next();

 private:
  uint64_t Draw();  // splitmix64
  uint64_t block_;
  uint64_t slots_;
  bool sequential_;
  uint64_t limit_;  // 0: no limit (a timed run)
  uint64_t issued_ = 0;
  uint64_t state_;
};

// What one round of one row measured.
struct UrlFigures {
  double elapsed_ms = 0;
  uint64_t reads = 0;
  uint64_t logical_bytes = 0;
  uint64_t physical_bytes = 0;
  std::optional<HttpStats> http;  // HTTP and S3 sources
  LatencyHistogram latency;
  std::optional<uint64_t> peak_inflight;  // rows with a limiter
  std::optional<uint64_t> peak_retained;
  std::string note;
};

// One round of a row: what it reads and until when.
struct UrlRound {
  const UrlBenchOptions* options;  // as given, with io_concurrency applied
  SourceOptions source;            // with size_hint set: GETs are reads
  uint64_t size = 0;               // the object's bytes
  uint64_t seed = 0;               // RangeGen(size, *options, seed)
  bool object_store = false;       // HTTP or S3 (else a local file)
  std::chrono::steady_clock::time_point deadline;  // max() for --reads
};

struct UrlRow {
  std::string name;
  std::function<Status(const UrlRound&, UrlFigures*)> run;
};

// The "rangeio" row: a Reader on OpenSource(url), `decorate` (when set)
// applied to the source first (the chunk barrier's row is this one).
Status RunReaderRow(
    const UrlRound& round,
    const std::function<std::shared_ptr<Source>(std::shared_ptr<Source>)>&
        decorate,
    UrlFigures* f);

// The rangeio row, then `others`. With a row named "direct", the table's
// "vs" column divides by it and a verdict compares rangeio's reads/s to it.
// InvalidArgument for options that cannot run (no URL, a zero block, an
// object smaller than one block), before any read but the size probe.
Result<Report> RunUrl(const UrlBenchOptions& options,
                      std::span<const UrlRow> others = {});

}  // namespace rangeio::bench
