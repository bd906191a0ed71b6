// rangeio — command-line tool: `cat` ranges of a file, run the benchmarks.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "bench_scenarios.h"
#include "cat.h"
#include "cli_options.h"
#include "progress.h"
#include "rangeio/rangeio.h"

namespace {

int Fail(const std::string& what, const rangeio::Status& st) {
  std::fprintf(stderr, "rangeio %s: %s\n", what.c_str(), st.ToString().c_str());
  return 1;
}

int RunBench(const std::vector<std::string>& scenarios,
             const rangeio::bench::BenchOptions& bo,
             const rangeio::bench::UrlBenchOptions& uo,
             const std::string& json_path, bool progress) {
  nlohmann::json all = nlohmann::json::array();
  for (const std::string& s : scenarios) {
    rangeio::bench::Progress::Get().Enable(progress);
    rangeio::bench::Progress::Get().Phase(s);
    auto rep = s == "straggler"   ? rangeio::bench::RunStraggler(bo)
               : s == "url"       ? rangeio::bench::RunUrl(uo)
               : s == "hot-cache" ? rangeio::bench::RunHotCache(bo)
               : s == "coalesce"  ? rangeio::bench::RunCoalesce(bo)
               : s == "local"     ? rangeio::bench::RunLocal(bo)
               : s == "http"      ? rangeio::bench::RunHttp(bo)
               : s == "soak"      ? rangeio::bench::RunSoak(bo)
               : s == "hedge"     ? rangeio::bench::RunHedge(bo)
               : s == "throttle"  ? rangeio::bench::RunThrottle(bo)
               : s == "vindex"    ? rangeio::bench::RunVindex(bo)
                                  : rangeio::bench::RunBlob(bo);
    rangeio::bench::Progress::Get().Done();
    if (!rep.ok()) return Fail("bench " + s, rep.status());
    rep->Print();
    all.push_back(rep->ToJson());
  }
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << (all.size() == 1 ? all[0] : nlohmann::json{{"scenarios", all}})
               .dump(2)
        << "\n";
    if (!out) {
      return Fail("bench", rangeio::Status::IoError(
                               "cannot write --json file '" + json_path + "'"));
    }
  }
  return 0;
}

}  // namespace

int Main(int argc, char** argv) {
  CLI::App app{
      "rangeio: many byte ranges from files and object stores, fast and "
      "bounded"};
  app.require_subcommand(1);

  std::string path;
  std::vector<std::string> ranges;
  std::vector<std::string> opts;
  rangeio::SourceOptions source_options;
  CLI::App* cat = app.add_subcommand(
      "cat", "Write byte ranges of an object to stdout, in the order given");
  cat->add_option("url", path,
                  "What to read: a path, or a file://, http://, https:// or "
                  "s3://bucket/key URL (S3 credentials come from the AWS "
                  "environment variables or the shared credentials file)")
      ->required();
  cat->add_option("--range,-r", ranges, "OFFSET:LENGTH in bytes (repeatable)")
      ->required();
  cat->add_option("--option,-o", opts,
                  "Option key=value, repeatable: reader options (e.g. "
                  "read-thread-num=16) and source options (e.g. "
                  "endpoint=http://127.0.0.1:9000, region=eu-west-1, "
                  "connect-timeout-ms=2000, size-hint=1GiB); every key is "
                  "in docs/options.md");
  std::string engine = "auto";
  cat->add_option("--engine", engine,
                  "How to read a local file: auto (io_uring with --direct, "
                  "or the pread pool where io_uring is refused; the pread "
                  "pool for buffered reads), pread, uring")
      ->check(CLI::IsMember({"auto", "pread", "uring"}));
  cat->add_flag("--direct", source_options.local.direct,
                "Read a local file with O_DIRECT (bypass the page cache)");

  rangeio::bench::BenchOptions bo;
  std::string json_path;
  CLI::App* bench = app.add_subcommand("bench",
                                       "Run benchmark scenarios (all when none "
                                       "is named) and print their tables");
  bench->add_option("--json", json_path,
                    "Also write the figures as JSON to this file");
  bench
      ->add_option("--rounds", bo.rounds,
                   "Rounds per strategy; the median is reported")
      ->check(CLI::Range(1, 1000));
  bench->add_option("--file", bo.file,
                    "hot-cache: test file (created if missing; default "
                    "$TMPDIR/rangeio-hot-cache.bin)");
  CLI::App* straggler = bench->add_subcommand(
      "straggler", "The chunk barrier: chunked vs rolling");
  CLI::App* hot = bench->add_subcommand(
      "hot-cache", "Scheduling overhead vs bare memcpy and pread");
  CLI::App* coalesce = bench->add_subcommand(
      "coalesce", "Planner presets none, local, object-store on posting lists");
  CLI::App* local = bench->add_subcommand(
      "local",
      "A real disk: pread pool vs io_uring, buffered vs O_DIRECT, and fio");
  local->add_option("--json", json_path,
                    "Also write the figures as JSON to this file");
  local->add_option("--file", bo.local_file,
                    "Test file of 2 GiB, a regular file (created if "
                    "missing, rewritten if of another size; default "
                    "$TMPDIR/rangeio-local.bin)");
  local
      ->add_option("--rounds", bo.rounds,
                   "uring-direct / fio pairs per block size (rounded up to "
                   "an even count, at least 4; the verdicts take the median "
                   "of the per-pair ratios)")
      ->check(CLI::Range(1, 1000));
  CLI::App* http = bench->add_subcommand(
      "http",
      "100 KiB ranges at C=64 through a 24 ms latency proxy: rangeio vs "
      "direct libcurl (needs tests/servers/run_servers.sh or --url)");
  http->add_option("--url", bo.url,
                   "Large object served through the latency proxy: http(s):// "
                   "or s3:// (S3 settings from AWS_*; default "
                   "$RANGEIO_BENCH_HTTP_URL)");
  http->add_option("--capacity-url", bo.capacity_url,
                   "The same object through a no-latency proxy listener, to "
                   "measure the proxy (default "
                   "$RANGEIO_BENCH_HTTP_CAPACITY_URL)");
  CLI::App* blob = bench->add_subcommand(
      "blob",
      "64 callers on one object through the 24 ms proxy: serialized vs "
      "dispatched batches vs direct GETs (needs tests/servers/run_servers.sh)");
  blob->add_option("--url", bo.url,
                   "A file served through the latency proxy; the blobs go "
                   "beside it (an s3:// bucket must hold them already; "
                   "default $RANGEIO_BENCH_HTTP_URL)");
  rangeio::bench::UrlBenchOptions uo;
  std::string block = "100KiB";
  std::string pattern = "random";
  std::string delivery = "as-completed";
  std::vector<std::string> url_opts;
  CLI::App* url = bench->add_subcommand(
      "url",
      "Load-test ranged reads of any object (s3://, http(s)://, file://, a "
      "path), like fio for disks or warp for S3");
  url->add_option("url", uo.url, "The object to read")->required();
  url->add_option("--block", block,
                  "Bytes per read (suffix K, KiB, M, MiB, G, GiB)")
      ->capture_default_str();
  url->add_option("--concurrency", uo.concurrency, "Reads in flight")
      ->capture_default_str();
  CLI::Option* seconds =
      url->add_option("--seconds", uo.seconds, "Run time per row (default 10)")
          ->check(CLI::PositiveNumber);
  url->add_option("--reads", uo.reads, "Reads per row instead of a run time")
      ->check(CLI::PositiveNumber)
      ->excludes(seconds);
  url->add_option("--pattern", pattern,
                  "random (uniform, block-aligned) or sequential")
      ->check(CLI::IsMember({"random", "sequential"}))
      ->capture_default_str();
  url->add_option("--delivery", delivery, "ordered or as-completed")
      ->check(CLI::IsMember({"ordered", "as-completed"}))
      ->capture_default_str();
  url->add_flag("--compare", uo.compare,
                "Add rows for plain libcurl GETs (or pread threads for a "
                "local file) and the chunked scheduler, in the same run");
  url->add_option("--option,-o", url_opts,
                  "Option key=value, repeatable: reader and source options "
                  "as for `rangeio cat` (docs/options.md)");
  bool quiet = false;
  bench->add_flag("--quiet,-q", quiet,
                  "No progress line on stderr (there is none when stderr is "
                  "not a terminal)");
  url->add_option("--json", json_path,
                  "Also write the figures as JSON to this file");
  url->add_option("--rounds", uo.rounds,
                  "Runs of each row, in rotating order, each on its own "
                  "random sequence (rates: the rounds' median)")
      ->check(CLI::Range(1, 1000));
  CLI::App* hedge = bench->add_subcommand(
      "hedge",
      "Hedged reads vs a straggler tail: sim, then HTTP via the relay");
  hedge->add_option("--url", bo.url,
                    "default $RANGEIO_BENCH_HTTP_STRAGGLER_URL");
  CLI::App* throttle = bench->add_subcommand(
      "throttle",
      "Adaptive concurrency vs fixed-64 against a relay answering 503 "
      "SlowDown above 800 requests/s");
  throttle->add_option("--url", bo.url,
                       "default $RANGEIO_BENCH_HTTP_THROTTLED_URL");
  throttle->add_option("--free-url", bo.capacity_url,
                       "default $RANGEIO_BENCH_HTTP_URL");
  throttle
      ->add_option("--seconds", bo.throttle_seconds,
                   "Run time per row (default 20)")
      ->check(CLI::Range(1.0, 3600.0));
  throttle->add_option("--json", json_path,
                       "Also write the figures as JSON to this file");
  for (CLI::App* sub :
       {straggler, hot, coalesce, local, http, blob, url, hedge, throttle}) {
    sub->add_flag("--quiet,-q", quiet, "No progress line on stderr");
  }
  for (CLI::App* sub : {straggler, hot, coalesce, http, blob, hedge}) {
    sub->add_option("--json", json_path,
                    "Also write the figures as JSON to this file");
    sub->add_option("--rounds", bo.rounds,
                    "Rounds per strategy; the median is reported")
        ->check(CLI::Range(1, 1000));
  }
  hot->add_option("--file", bo.file, "Test file (created if missing)");
  CLI::App* soak = bench->add_subcommand(
      "soak", "64 threads, faults, cancels and drops: no wrong byte, no leak");
  soak->add_option("--seconds", bo.soak_seconds, "How long (default 600)")
      ->check(CLI::Range(1, 86'400));
  soak->add_option("--json", json_path, "Also write the figures as JSON");
  CLI::App* vindex = bench->add_subcommand(
      "vindex",
      "FAISS IVF search with posting lists read by rangeio: in memory, mmap, "
      "local file, HTTP chunked and rolling (needs libfaiss-dev; HTTP rows "
      "need tests/servers/run_servers.sh)");
  vindex->add_option("--vectors", bo.vindex_vectors, "Vectors of 128 floats")
      ->check(CLI::Range(20'000, 10'000'000))
      ->capture_default_str();
  vindex->add_option("--queries", bo.vindex_queries, "Queries per batch")
      ->check(CLI::Range(8, 100'000))
      ->capture_default_str();
  vindex->add_option("--json", json_path, "Also write the figures as JSON");
  vindex->add_flag("--quiet,-q", quiet, "No progress line on stderr");

  CLI11_PARSE(app, argc, argv);

  if (cat->parsed()) {
    auto local_engine = rangeio::ParseLocalEngine(engine);
    if (!local_engine.ok()) return Fail("cat", local_engine.status());
    source_options.local.engine = *local_engine;
    auto options = rangeio::cli::ParseCliOptions(opts, source_options);
    if (!options.ok()) return Fail("cat", options.status());
    rangeio::Status st = rangeio::cli::Cat(path, ranges, *options);
    return st.ok() ? 0 : Fail("cat", st);
  }
  std::vector<std::string> scenarios;
  if (straggler->parsed()) scenarios.push_back("straggler");
  if (hot->parsed()) scenarios.push_back("hot-cache");
  if (coalesce->parsed()) scenarios.push_back("coalesce");
  if (local->parsed()) scenarios.push_back("local");
  if (http->parsed()) scenarios.push_back("http");
  if (blob->parsed()) scenarios.push_back("blob");
  if (soak->parsed()) scenarios.push_back("soak");
  if (url->parsed()) {
    auto b = rangeio::bench::ParseByteSize("--block", block);
    if (!b.ok()) return Fail("bench url", b.status());
    uo.block = *b;
    uo.sequential = pattern == "sequential";
    uo.delivery = delivery == "ordered" ? rangeio::Delivery::kOrdered
                                        : rangeio::Delivery::kAsCompleted;
    auto o = rangeio::cli::ParseCliOptions(url_opts);
    if (!o.ok()) return Fail("bench url", o.status());
    uo.reader = o->reader;
    uo.source = o->source;
    uo.local_threads_set = o->local_threads_set;
    scenarios.push_back("url");
  }
  if (hedge->parsed()) scenarios.push_back("hedge");
  if (throttle->parsed()) scenarios.push_back("throttle");
  if (vindex->parsed()) scenarios.push_back("vindex");
  if (scenarios.empty()) {
    // The embedded-defaults run: every scenario that needs no servers.
    scenarios = {"straggler", "hot-cache", "coalesce", "local"};
  }
  return RunBench(scenarios, bo, uo, json_path, !quiet);
}

int main(int argc, char** argv) {
  // CLI11 and nlohmann_json throw; say what went wrong instead of terminating.
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rangeio: %s\n", e.what());
    return 1;
  }
}
