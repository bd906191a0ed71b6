// url_cli.cc — see url_cli.h.
#include "url_cli.h"

#include <cstdio>
#include <fstream>

#include "cli_options.h"

namespace rangeio::cli {

CLI::App* AddUrlCommand(CLI::App* parent, UrlCli* cli) {
  bench::UrlBenchOptions& uo = cli->options;
  CLI::App* url = parent->add_subcommand(
      "url",
      "Load-test ranged reads of any object (s3://, http(s)://, file://, a "
      "path), like fio for disks or warp for S3");
  url->add_option("url", uo.url, "The object to read")->required();
  url->add_option("--block", cli->block,
                  "Bytes per read (suffix K, KiB, M, MiB, G, GiB, T, TiB)")
      ->capture_default_str();
  url->add_option("--concurrency", uo.concurrency, "Reads in flight")
      ->capture_default_str();
  CLI::Option* seconds =
      url->add_option("--seconds", uo.seconds, "Run time per row (default 10)")
          ->check(CLI::PositiveNumber);
  url->add_option("--reads", uo.reads, "Reads per row instead of a run time")
      ->check(CLI::PositiveNumber)
      ->excludes(seconds);
  url->add_option("--pattern", cli->pattern,
                  "random (uniform, block-aligned) or sequential")
      ->check(CLI::IsMember({"random", "sequential"}))
      ->capture_default_str();
  url->add_option("--delivery", cli->delivery, "ordered or as-completed")
      ->check(CLI::IsMember({"ordered", "as-completed"}))
      ->capture_default_str();
  url->add_option("--option,-o", cli->opts,
                  "Option key=value, repeatable: reader and source options "
                  "as for `rangeio cat` (docs/options.md)");
  url->add_option("--json", cli->json_path,
                  "Also write the figures as JSON to this file");
  url->add_option("--rounds", uo.rounds,
                  "Runs of each row, in rotating order, each on its own "
                  "random sequence (rates: the rounds' median)")
      ->check(CLI::Range(1, 1000));
  url->add_flag("--quiet,-q", cli->quiet,
                "No progress line on stderr (there is none when stderr is "
                "not a terminal)");
  return url;
}

Status FinishUrlCli(UrlCli* cli) {
  bench::UrlBenchOptions& uo = cli->options;
  RANGEIO_ASSIGN_OR_RETURN(uo.block, ParseByteSize("--block", cli->block));
  uo.sequential = cli->pattern == "sequential";
  uo.delivery =
      cli->delivery == "ordered" ? Delivery::kOrdered : Delivery::kAsCompleted;
  RANGEIO_ASSIGN_OR_RETURN(CliOptions o, ParseCliOptions(cli->opts));
  uo.reader = o.reader;
  uo.source = o.source;
  return Status::OK();
}

int PrintReport(const char* tool, const Result<bench::Report>& report,
                const std::string& json_path) {
  if (!report.ok()) {
    std::fprintf(stderr, "%s: %s\n", tool, report.status().ToString().c_str());
    return 1;
  }
  report->Print();
  if (json_path.empty()) return 0;
  std::ofstream out(json_path);
  out << report->ToJson().dump(2) << "\n";
  if (!out) {
    std::fprintf(stderr, "%s: cannot write --json file '%s'\n", tool,
                 json_path.c_str());
    return 1;
  }
  return 0;
}

}  // namespace rangeio::cli
