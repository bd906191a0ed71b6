// bench_url_compare.cc — rangeio-bench url --compare: `rangeio bench url`
// (tools/url_bench.h) with two more rows on the same sequence of ranges:
//   direct    no library: plain libcurl multi, one GET per read, the same
//             concurrency and signing (HTTP, S3), or `concurrency` threads
//             each in a blocking pread loop (local files);
//   chunked   the same Reader behind the chunk barrier (the seed's "before").
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "bench_object.h"
#include "bench_scenarios.h"
#include "chunk_barrier.h"
#include "direct_curl.h"
#include "progress.h"
#include "url_bench.h"

namespace rangeio::bench {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The direct row over HTTP or S3: what a hand-written libcurl loop gets.
Status RunDirectHttp(const UrlRound& round, UrlFigures* f) {
  const UrlBenchOptions& o = *round.options;
  DirectTarget target;
  target.verify_tls = round.source.http.verify_tls;
  target.ca_file = round.source.http.ca_file;
  // The URL, region and credentials that OpenSource resolves, signed as the
  // library signs.
  RANGEIO_ASSIGN_OR_RETURN(const BenchObject object,
                           BenchObject::Resolve(o.url, round.source.s3));
  target.url = object.get_url();
  target.configure = [&object](CURL* easy) { object.Sign(easy); };
  DirectCurl direct(o.concurrency);
  RangeGen gen(round.size, o, round.seed);
  DirectFigures d;
  RANGEIO_RETURN_NOT_OK(direct.Run(
      target, [&] { return gen.Next(); }, round.deadline, &d));
  f->elapsed_ms = d.elapsed_ms;
  f->reads = d.reads;
  f->logical_bytes = d.bytes;
  f->physical_bytes = d.bytes;
  f->latency = d.latency;
  HttpStats hs;
  hs.gets = d.gets;
  f->http = hs;
  f->note = "libcurl multi, one GET per read";
  return Status::OK();
}

// One thread of the direct pread row: reads the shared sequence until it
// or the time ends. False on a short read.
bool PreadLoop(int fd, const UrlRound& round, RangeGen& gen, std::mutex& mu,
               std::atomic<bool>& failed, LatencyHistogram* latency) {
  const uint64_t block = round.options->block;
  // O_DIRECT wants an aligned buffer; 4 KiB covers every device here.
  void* buf = std::aligned_alloc(4096, (block + 4095) / 4096 * 4096);
  bool ok = buf != nullptr;
  while (ok) {
    std::optional<ByteRange> r;
    {
      std::lock_guard lk(mu);
      r = gen.Next();
    }
    if (!r || Clock::now() >= round.deadline || failed.load()) break;
    const Clock::time_point s = Clock::now();
    const ssize_t n =
        ::pread(fd, buf, r->length, static_cast<off_t>(r->offset));
    ok = n == static_cast<ssize_t>(r->length);
    if (!ok) break;
    latency->Record(static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - s)
            .count()));
    Progress::Get().AddReads(1);
  }
  std::free(buf);
  if (!ok) failed.store(true);
  return ok;
}

// The direct row for a local file: `concurrency` threads, each a blocking
// pread loop over the shared sequence.
Status RunDirectPread(const UrlRound& round, UrlFigures* f) {
  const UrlBenchOptions& o = *round.options;
  // The path OpenSource reads (file:// decoded).
  RANGEIO_ASSIGN_OR_RETURN(std::shared_ptr<Source> local,
                           OpenSource(o.url, round.source));
  const std::string path = local->name();
  const bool direct = round.source.local.direct;
  const int fd =
      ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (direct ? O_DIRECT : 0));
  if (fd < 0) return Status::FromErrno(errno, "opening '" + path + "'");
  RangeGen gen(round.size, o, round.seed);
  std::mutex mu;
  std::atomic<bool> failed{false};
  std::vector<LatencyHistogram> latency(o.concurrency);
  const Clock::time_point t0 = Clock::now();
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < o.concurrency; ++t) {
    threads.emplace_back(
        [&, t] { PreadLoop(fd, round, gen, mu, failed, &latency[t]); });
  }
  for (std::thread& t : threads) t.join();
  ::close(fd);
  if (failed.load()) {
    return Status::IoError("direct pread of '" + path + "' returned short");
  }
  f->elapsed_ms = MsSince(t0);
  for (const LatencyHistogram& h : latency) f->latency.Merge(h);
  f->reads = f->latency.count();
  f->logical_bytes = f->physical_bytes = f->reads * o.block;
  f->note = std::to_string(o.concurrency) + " threads, blocking pread" +
            (direct ? ", O_DIRECT" : ", buffered");
  return Status::OK();
}

}  // namespace

Result<Report> RunUrlCompare(const UrlBenchOptions& options) {
  const UrlRow rows[] = {{"direct",
                          [](const UrlRound& r, UrlFigures* f) {
                            return r.object_store ? RunDirectHttp(r, f)
                                                  : RunDirectPread(r, f);
                          }},
                         {"chunked", [](const UrlRound& r, UrlFigures* f) {
                            const uint32_t c = r.options->concurrency;
                            return RunReaderRow(
                                r,
                                [c](std::shared_ptr<Source> s) {
                                  return WithChunkBarrier(std::move(s), c);
                                },
                                f);
                          }}};
  return RunUrl(options, rows);
}

}  // namespace rangeio::bench
