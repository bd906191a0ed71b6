// url_cli.h — the `bench url` subcommand's flags, shared by the rangeio CLI
// and rangeio-bench (which adds --compare).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "rangeio/status.h"
#include "url_bench.h"

namespace rangeio::cli {

struct UrlCli {
  bench::UrlBenchOptions options;
  std::string block = "100KiB";
  std::string pattern = "random";
  std::string delivery = "as-completed";
  std::vector<std::string> opts;  // -o key=value
  std::string json_path;
  bool quiet = false;
};

// Adds `url` under `parent` with every flag of bench url, bound to `cli`.
CLI::App* AddUrlCommand(CLI::App* parent, UrlCli* cli);

// After parsing: the sizes, enums and -o list into cli->options, or
// InvalidArgument naming the flag.
Status FinishUrlCli(UrlCli* cli);

// Prints the report, writes --json when given. 0, or 1 after saying why on
// stderr (`tool`: the executable's name for the message).
int PrintReport(const char* tool, const Result<bench::Report>& report,
                const std::string& json_path);

}  // namespace rangeio::cli
