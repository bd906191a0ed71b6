// rangeio — the command-line tool: `cat` ranges of an object to stdout,
// `bench url` to load-test ranged reads of one. The acceptance benchmarks
// are another executable, rangeio-bench (bench/).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "cat.h"
#include "cli_options.h"
#include "progress.h"
#include "rangeio/rangeio.h"
#include "url_cli.h"

namespace {

int Fail(const std::string& what, const rangeio::Status& st) {
  std::fprintf(stderr, "rangeio %s: %s\n", what.c_str(), st.ToString().c_str());
  return 1;
}

int RunUrl(rangeio::cli::UrlCli* url) {
  if (rangeio::Status st = rangeio::cli::FinishUrlCli(url); !st.ok()) {
    return Fail("bench url", st);
  }
  rangeio::bench::Progress::Get().Enable(!url->quiet);
  rangeio::bench::Progress::Get().Phase("url");
  auto report = rangeio::bench::RunUrl(url->options);
  rangeio::bench::Progress::Get().Done();
  return rangeio::cli::PrintReport("rangeio bench url", report, url->json_path);
}

// `rangeio bench straggler` and the like moved to rangeio-bench: say so
// rather than CLI11's "A subcommand is required".
bool MovedToRangeioBench(int argc, char** argv) {
  if (argc < 3 || std::string_view(argv[1]) != "bench") return false;
  const std::string_view s = argv[2];
  for (const char* moved :
       {"straggler", "hot-cache", "coalesce", "local", "http", "blob", "soak",
        "hedge", "throttle", "vindex"}) {
    if (s == moved) {
      std::fprintf(stderr,
                   "rangeio bench %s: the acceptance benchmarks are "
                   "rangeio-bench's (built beside this tool as "
                   "bench/rangeio-bench): run `rangeio-bench %s`\n",
                   moved, moved);
      return true;
    }
  }
  return false;
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

  CLI::App* bench = app.add_subcommand(
      "bench",
      "Load-test ranged reads (the acceptance benchmarks are "
      "rangeio-bench)");
  bench->require_subcommand(1);
  bench->footer(
      "The acceptance benchmarks (straggler, hot-cache, coalesce, local, "
      "http, blob, hedge, throttle, soak, vindex) are rangeio-bench's, built "
      "beside this tool (build/bench/rangeio-bench).");
  rangeio::cli::UrlCli url;
  rangeio::cli::AddUrlCommand(bench, &url);

  if (MovedToRangeioBench(argc, argv)) return 1;
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
  return RunUrl(&url);
}

int main(int argc, char** argv) {
  // CLI11 throws; say what went wrong instead of terminating.
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rangeio: %s\n", e.what());
    return 1;
  }
}
