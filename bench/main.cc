// rangeio-bench — the acceptance benchmarks (docs/benchmarks.md): each
// scenario runs its competing strategies in one process and prints a table
// with verdicts. With no scenario, the ones that need no servers.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <fstream>
#include <string>
#include <vector>

#include "bench_scenarios.h"
#include "progress.h"
#include "url_cli.h"

namespace rangeio::bench {

// bench_url_compare.cc: `rangeio bench url` with the direct and chunked rows.
Result<Report> RunUrlCompare(const UrlBenchOptions& options);

namespace {

struct Flags {
  BenchOptions bo;
  cli::UrlCli url;
  bool compare = false;  // url --compare
  std::string json_path;
  bool quiet = false;
};

using RunFn = Result<Report> (*)(const BenchOptions&);

struct Scenario {
  const char* name;
  const char* help;
  RunFn run;
  CLI::App* app = nullptr;
};

std::vector<Scenario> Scenarios() {
  return {
      {"straggler", "The chunk barrier: chunked vs rolling", RunStraggler},
      {"hot-cache", "Scheduling overhead vs bare memcpy and pread",
       RunHotCache},
      {"coalesce", "Planner presets none, local, object-store on posting lists",
       RunCoalesce},
      {"local",
       "A real disk: pread pool vs io_uring, buffered vs O_DIRECT, and fio",
       RunLocal},
      {"http",
       "100 KiB ranges at C=64 through a 24 ms latency proxy: rangeio vs "
       "direct libcurl (needs tests/servers/run_servers.sh or --url)",
       RunHttp},
      {"blob",
       "64 callers on one object through the 24 ms proxy: serialized vs "
       "dispatched batches vs direct GETs (needs tests/servers/run_servers.sh)",
       RunBlob},
      {"soak", "64 threads, faults, cancels and drops: no wrong byte, no leak",
       RunSoak},
      {"hedge",
       "Hedged reads vs a straggler tail: sim, then HTTP via the relay",
       RunHedge},
      {"throttle",
       "Adaptive concurrency vs fixed-64 against a relay answering 503 "
       "SlowDown above 800 requests/s",
       RunThrottle},
      {"vindex",
       "FAISS IVF search with posting lists read by rangeio: in memory, mmap, "
       "local file, HTTP chunked and rolling (needs libfaiss-dev; HTTP rows "
       "need tests/servers/run_servers.sh)",
       RunVindex},
  };
}

// Flags every scenario has, and the ones of a few.
void AddCommonFlags(Scenario& s, Flags* f) {
  const std::string name = s.name;
  s.app->add_option("--json", f->json_path,
                    "Also write the figures as JSON to this file");
  s.app->add_flag("--quiet,-q", f->quiet, "No progress line on stderr");
  if (name != "soak" && name != "vindex" && name != "throttle") {
    s.app
        ->add_option("--rounds", f->bo.rounds,
                     name == "local"
                         ? "uring-direct / fio pairs per block size (rounded "
                           "up to an even count, at least 4; the verdicts "
                           "take the median of the per-pair ratios)"
                         : "Rounds per strategy; the median is reported")
        ->check(CLI::Range(1, 1000));
  }
  const char* url_env = name == "hedge"                    ? "STRAGGLER_URL"
                        : name == "throttle"               ? "THROTTLED_URL"
                        : name == "http" || name == "blob" ? "URL"
                                                           : nullptr;
  if (url_env != nullptr) {
    s.app->add_option("--url", f->bo.url,
                      "The object through the latency relay: http(s):// or "
                      "s3:// (default $RANGEIO_BENCH_HTTP_" +
                          std::string(url_env) + ")");
  }
}

void AddScenarioFlags(std::vector<Scenario>& scenarios, Flags* f) {
  for (Scenario& s : scenarios) {
    AddCommonFlags(s, f);
    const std::string name = s.name;
    if (name == "hot-cache") {
      s.app->add_option("--file", f->bo.file,
                        "Test file (created if missing; default "
                        "$TMPDIR/rangeio-hot-cache.bin)");
    } else if (name == "local") {
      s.app->add_option("--file", f->bo.local_file,
                        "Test file of 2 GiB, a regular file (created if "
                        "missing, rewritten if of another size; default "
                        "$TMPDIR/rangeio-local.bin)");
    } else if (name == "http") {
      s.app->add_option("--capacity-url", f->bo.capacity_url,
                        "The same object through a no-latency proxy "
                        "listener, to measure the proxy (default "
                        "$RANGEIO_BENCH_HTTP_CAPACITY_URL)");
    } else if (name == "throttle") {
      s.app->add_option("--free-url", f->bo.capacity_url,
                        "default $RANGEIO_BENCH_HTTP_URL");
      s.app
          ->add_option("--seconds", f->bo.throttle_seconds,
                       "Run time per row (default 20)")
          ->check(CLI::Range(1.0, 3600.0));
    } else if (name == "soak") {
      s.app
          ->add_option("--seconds", f->bo.soak_seconds,
                       "How long (default 600)")
          ->check(CLI::Range(1, 86'400));
    } else if (name == "vindex") {
      s.app
          ->add_option("--vectors", f->bo.vindex_vectors,
                       "Vectors of 128 floats")
          ->check(CLI::Range(20'000, 10'000'000))
          ->capture_default_str();
      s.app->add_option("--queries", f->bo.vindex_queries, "Queries per batch")
          ->check(CLI::Range(8, 100'000))
          ->capture_default_str();
    }
  }
}

int Fail(const std::string& what, const Status& st) {
  std::fprintf(stderr, "rangeio-bench %s: %s\n", what.c_str(),
               st.ToString().c_str());
  return 1;
}

int WriteJson(const nlohmann::json& all, const std::string& path) {
  if (path.empty()) return 0;
  std::ofstream out(path);
  out << (all.size() == 1 ? all[0] : nlohmann::json{{"scenarios", all}}).dump(2)
      << "\n";
  if (out) return 0;
  return Fail("", Status::IoError("cannot write --json file '" + path + "'"));
}

// Runs the scenarios named (the server-free ones when none is), prints
// each table, writes --json.
int RunScenarios(const std::vector<Scenario>& scenarios, const Flags& f,
                 bool url) {
  std::vector<const Scenario*> chosen;
  for (const Scenario& s : scenarios) {
    if (s.app->parsed()) chosen.push_back(&s);
  }
  if (chosen.empty() && !url) {
    for (const Scenario& s : scenarios) {
      const std::string n = s.name;
      if (n == "straggler" || n == "hot-cache" || n == "coalesce" ||
          n == "local") {
        chosen.push_back(&s);
      }
    }
  }
  nlohmann::json all = nlohmann::json::array();
  for (const Scenario* s : chosen) {
    Progress::Get().Enable(!f.quiet);
    Progress::Get().Phase(s->name);
    Result<Report> rep = s->run(f.bo);
    Progress::Get().Done();
    if (!rep.ok()) return Fail(s->name, rep.status());
    rep->Print();
    all.push_back(rep->ToJson());
  }
  if (url) {
    Progress::Get().Enable(!f.url.quiet);
    Progress::Get().Phase("url");
    Result<Report> rep =
        f.compare ? RunUrlCompare(f.url.options) : RunUrl(f.url.options);
    Progress::Get().Done();
    if (!rep.ok()) return Fail("url", rep.status());
    rep->Print();
    all.push_back(rep->ToJson());
  }
  return WriteJson(all, url ? f.url.json_path : f.json_path);
}

int Main(int argc, char** argv) {
  CLI::App app{
      "rangeio-bench: the acceptance benchmarks of rangeio (all that need no "
      "servers when no scenario is named)"};
  Flags f;
  app.add_option("--json", f.json_path,
                 "Also write the figures as JSON to this file");
  app.add_option("--rounds", f.bo.rounds,
                 "Rounds per strategy; the median is reported")
      ->check(CLI::Range(1, 1000));
  app.add_flag("--quiet,-q", f.quiet, "No progress line on stderr");
  std::vector<Scenario> scenarios = Scenarios();
  for (Scenario& s : scenarios) s.app = app.add_subcommand(s.name, s.help);
  AddScenarioFlags(scenarios, &f);
  CLI::App* url = cli::AddUrlCommand(&app, &f.url);
  url->add_flag("--compare", f.compare,
                "Add rows for plain libcurl GETs (or pread threads for a "
                "local file) and the chunked scheduler, in the same run");
  CLI11_PARSE(app, argc, argv);
  if (url->parsed()) {
    if (Status st = cli::FinishUrlCli(&f.url); !st.ok()) {
      return Fail("url", st);
    }
  }
  return RunScenarios(scenarios, f, url->parsed());
}

}  // namespace
}  // namespace rangeio::bench

int main(int argc, char** argv) {
  // CLI11 and nlohmann_json throw; say what went wrong instead of terminating.
  try {
    return rangeio::bench::Main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rangeio-bench: %s\n", e.what());
    return 1;
  }
}
