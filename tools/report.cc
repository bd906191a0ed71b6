// report.cc — see report.h.
#include "report.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace rangeio::bench {

double Row::elapsed_ms() const {
  if (elapsed_ms_runs.empty()) return 0;
  std::vector<double> v = elapsed_ms_runs;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

const Row* Report::Find(const std::string& strategy) const {
  for (const Row& r : rows) {
    if (r.strategy == strategy) return &r;
  }
  return nullptr;
}

const IoRow* Report::FindIo(const std::string& strategy,
                            uint64_t block_size) const {
  for (const IoRow& r : io_rows) {
    if (r.strategy == strategy && r.block_size == block_size) return &r;
  }
  return nullptr;
}

namespace {

std::string SizeName(uint64_t bytes) {
  if (bytes % (1 << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes % (1 << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

void PrintIoRows(const std::vector<IoRow>& rows) {
  std::printf("%-18s %8s %10s %10s %10s %10s %14s %9s  %s\n", "strategy",
              "block", "iops", "mib_per_s", "p50_us", "p99_us",
              "cpu_s_per_100k", "reads", "engine");
  for (const IoRow& r : rows) {
    std::printf("%-18s %8s %10.0f %10.1f %10.0f %10.0f %14.3f %9llu  %s\n",
                r.strategy.c_str(), SizeName(r.block_size).c_str(), r.iops(),
                r.mib_per_s(), r.p50_us, r.p99_us, r.cpu_s_per_100k(),
                static_cast<unsigned long long>(r.reads), r.note.c_str());
  }
}

}  // namespace

void Report::Print() const {
  std::printf("\n== %s  %s\n", scenario.c_str(), config.dump().c_str());
  if (!io_rows.empty()) {
    PrintIoRows(io_rows);
    for (const std::string& l : lines) std::printf("%s\n", l.c_str());
    std::fflush(stdout);
    return;
  }
  std::printf("%-18s %12s %14s %9s %10s %14s %14s\n", "strategy", "elapsed_ms",
              "ranges_per_s", "vs", "min..max", "peak_inflight",
              "peak_retained");
  const Row* base = baseline.empty() ? nullptr : Find(baseline);
  for (const Row& r : rows) {
    const auto [lo, hi] =
        std::minmax_element(r.elapsed_ms_runs.begin(), r.elapsed_ms_runs.end());
    char vs[32] = "";
    if (base) {
      std::snprintf(vs, sizeof vs, "%.2fx",
                    r.ranges_per_s() / base->ranges_per_s());
    }
    char range[48];
    std::snprintf(range, sizeof range, "%.1f..%.1f", *lo, *hi);
    std::printf(
        "%-18s %12.2f %14.0f %9s %10s %14s %14s\n", r.strategy.c_str(),
        r.elapsed_ms(), r.ranges_per_s(), vs, range,
        r.peak_inflight ? std::to_string(*r.peak_inflight).c_str() : "-",
        r.peak_retained ? std::to_string(*r.peak_retained).c_str() : "-");
  }
  if (lower_bound_ms) {
    std::printf(
        "%-18s %12.2f %14.0f\n", "lower-bound", *lower_bound_ms,
        rows.empty() ? 0.0 : rows[0].ranges / (*lower_bound_ms / 1000.0));
  }
  PrintExtra();
  for (const std::string& l : lines) std::printf("%s\n", l.c_str());
  std::fflush(stdout);
}

void Report::PrintExtra() const {
  std::vector<std::string> keys = extra_order;  // then as the rows give them
  for (const Row& r : rows) {
    if (!r.extra.is_object()) continue;
    for (const auto& [k, v] : r.extra.items()) {
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) {
        keys.push_back(k);
      }
    }
  }
  std::erase_if(keys, [this](const std::string& k) {
    return std::none_of(rows.begin(), rows.end(), [&k](const Row& r) {
      return r.extra.is_object() && r.extra.contains(k);
    });
  });
  if (keys.empty()) return;
  std::printf("%-18s", "strategy");
  for (const std::string& k : keys) std::printf(" %14s", k.c_str());
  std::printf("\n");
  for (const Row& r : rows) {
    std::printf("%-18s", r.strategy.c_str());
    for (const std::string& k : keys) {
      const bool has = r.extra.is_object() && r.extra.contains(k);
      if (has && r.extra[k].is_number_float()) {
        std::printf(" %14.2f", r.extra[k].get<double>());
      } else if (has) {
        std::printf(" %14s", r.extra[k].dump().c_str());
      } else {
        std::printf(" %14s", "-");
      }
    }
    std::printf("\n");
  }
}

nlohmann::json Report::ToJson() const {
  nlohmann::json j;
  j["scenario"] = scenario;
  j["config"] = config;
  if (!details.is_null()) j["details"] = details;
  j["rows"] = nlohmann::json::array();
  for (const IoRow& r : io_rows) {
    j["rows"].push_back({{"strategy", r.strategy},
                         {"block_size", r.block_size},
                         {"iops", r.iops()},
                         {"mib_per_s", r.mib_per_s()},
                         {"p50_us", r.p50_us},
                         {"p99_us", r.p99_us},
                         {"cpu_s_per_100k", r.cpu_s_per_100k()},
                         {"reads", r.reads},
                         {"seconds", r.seconds},
                         {"cpu_seconds", r.cpu_seconds},
                         {"engine", r.note}});
  }
  const Row* base = baseline.empty() ? nullptr : Find(baseline);
  for (const Row& r : rows) {
    nlohmann::json row = {{"strategy", r.strategy},
                          {"elapsed_ms", r.elapsed_ms()},
                          {"elapsed_ms_runs", r.elapsed_ms_runs},
                          {"ranges", r.ranges},
                          {"ranges_per_s", r.ranges_per_s()}};
    row["peak_inflight"] =
        r.peak_inflight ? nlohmann::json(*r.peak_inflight) : nlohmann::json();
    row["peak_retained"] =
        r.peak_retained ? nlohmann::json(*r.peak_retained) : nlohmann::json();
    if (lower_bound_ms) row["lower_bound_ms"] = *lower_bound_ms;
    if (base) row["vs_" + baseline] = r.ranges_per_s() / base->ranges_per_s();
    if (!r.note.empty()) row["note"] = r.note;
    if (r.extra.is_object()) row.update(r.extra);
    j["rows"].push_back(row);
  }
  j["verdicts"] = lines;
  return j;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace rangeio::bench
