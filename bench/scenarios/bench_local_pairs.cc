// bench local's comparison with fio: the interleaved uring-direct / fio
// pairs of each block size (their runs, the per-pair ratios and the median
// rows), and the targets judged on their medians (bench_local.cc's header
// comment says how the pairs are run and why).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "bench_local.h"
#include "progress.h"

namespace rangeio::bench {
namespace {

// One pair: uring-direct and fio back to back, on the same file and block.
struct Pair {
  IoRow ours;
  IoRow fio;
  bool ours_first = true;
  double iops_ratio() const { return ours.iops() / fio.iops(); }
  double cpu_ratio() const { return CpuPerRead(ours) / CpuPerRead(fio); }
};

// Runs the pairs of one block size, the first of each pair alternating:
// each side reads the next of `regions`; fio's CPU is less its start-up,
// measured once here.
Result<std::vector<Pair>> RunPairSides(const std::string& path, uint64_t bs,
                                       std::span<const Region> regions,
                                       int pairs) {
  std::vector<Pair> runs(static_cast<size_t>(pairs));
  RANGEIO_ASSIGN_OR_RETURN(const double fio_startup,
                           FioStartupCpu(path, bs, kConcurrency));
  for (int p = 0; p < pairs; ++p) {
    Pair& pair = runs[static_cast<size_t>(p)];
    pair.ours_first = p % 2 == 0;
    const std::string phase = "local: pair " + std::to_string(p + 1) + "/" +
                              std::to_string(pairs) + " " +
                              std::to_string(bs >> 10) + " KiB";
    for (int side = 0; side < 2; ++side) {
      if ((side == 0) == pair.ours_first) {
        Progress::Get().Phase(phase + " uring-direct");
        RANGEIO_ASSIGN_OR_RETURN(
            pair.ours, RunUringDirect(path, bs, regions[2 * p + side]));
      } else {
        Progress::Get().Phase(phase + " fio");
        const Region& r = regions[2 * p + side];
        RANGEIO_ASSIGN_OR_RETURN(
            pair.fio, RunFio(path, bs, kConcurrency, kRowSeconds, r.offset,
                             r.bytes, fio_startup));
        Progress::Get().AddReads(pair.fio.reads);
      }
    }
  }
  return runs;
}

// How far the pair's fio IOPS is off the fio median (0.1: 10% above).
double FioDrift(const Pair& p, const PairSummary& sum) {
  return p.fio.iops() / sum.fio_iops - 1;
}

// The medians and spreads of the per-pair ratios, the fio median, and how
// many pairs' fio drifted from it.
PairSummary Summarize(uint64_t bs, const std::vector<Pair>& runs) {
  PairSummary sum;
  sum.block_size = bs;
  sum.pairs = static_cast<int>(runs.size());
  std::vector<double> iops;
  std::vector<double> cpu;
  std::vector<double> fio;
  iops.reserve(runs.size());
  cpu.reserve(runs.size());
  fio.reserve(runs.size());
  for (const Pair& p : runs) {
    iops.push_back(p.iops_ratio());
    cpu.push_back(p.cpu_ratio());
    fio.push_back(p.fio.iops());
  }
  sum.iops_ratio = Median(iops);
  sum.iops_min = *std::min_element(iops.begin(), iops.end());
  sum.iops_max = *std::max_element(iops.begin(), iops.end());
  sum.cpu_ratio = Median(cpu);
  sum.cpu_min = *std::min_element(cpu.begin(), cpu.end());
  sum.cpu_max = *std::max_element(cpu.begin(), cpu.end());
  sum.fio_iops = Median(fio);
  for (const Pair& p : runs) {
    sum.drifted += std::abs(FioDrift(p, sum)) > kFioDrift ? 1 : 0;
  }
  return sum;
}

// A line per pair under the table and one for their medians; the pairs'
// figures and the summary into `json` under the block size.
void AddPairLines(const std::vector<Pair>& runs, const PairSummary& sum,
                  Report* rep, nlohmann::json* json) {
  char line[240];
  std::snprintf(line, sizeof line,
                "  %s pairs, uring-direct / fio-uring-direct (first of each "
                "pair alternating):",
                sum.block_size == 4096 ? "4 KiB" : "1 MiB");
  rep->lines.push_back(line);
  nlohmann::json jpairs = nlohmann::json::array();
  for (size_t i = 0; i < runs.size(); ++i) {
    const Pair& p = runs[i];
    const double drift = FioDrift(p, sum);
    const bool drifted = std::abs(drift) > kFioDrift;
    std::snprintf(
        line, sizeof line,
        "    pair %zu (%s first): IOPS %.2fx, CPU/read %.2fx; "
        "fio %.0f IOPS, %.1f us CPU/read%s",
        i + 1, p.ours_first ? "rangeio" : "fio", p.iops_ratio(), p.cpu_ratio(),
        p.fio.iops(), CpuPerRead(p.fio) * 10,
        drifted ? "  FIO DRIFT: off the fio median by more than 20%" : "");
    rep->lines.push_back(line);
    jpairs.push_back({{"ours_first", p.ours_first},
                      {"iops", p.ours.iops()},
                      {"fio_iops", p.fio.iops()},
                      {"cpu_s_per_100k", CpuPerRead(p.ours)},
                      {"fio_cpu_s_per_100k", CpuPerRead(p.fio)},
                      {"iops_ratio", p.iops_ratio()},
                      {"cpu_ratio", p.cpu_ratio()},
                      {"fio_drift", drift},
                      {"fio_drifted", drifted}});
  }
  std::snprintf(line, sizeof line,
                "    median of %d pairs: IOPS %.2fx (spread %.2f-%.2f), "
                "CPU/read %.2fx (spread %.2f-%.2f)%s",
                sum.pairs, sum.iops_ratio, sum.iops_min, sum.iops_max,
                sum.cpu_ratio, sum.cpu_min, sum.cpu_max,
                sum.drifted > 0 ? "; fio drifted: the machine was not steady, "
                                  "measure again on a quiet one"
                                : "");
  rep->lines.push_back(line);
  (*json)[std::to_string(sum.block_size)] = {
      {"pairs", jpairs},
      {"iops_ratio_median", sum.iops_ratio},
      {"iops_ratio_min", sum.iops_min},
      {"iops_ratio_max", sum.iops_max},
      {"cpu_ratio_median", sum.cpu_ratio},
      {"cpu_ratio_min", sum.cpu_min},
      {"cpu_ratio_max", sum.cpu_max},
      {"fio_iops_median", sum.fio_iops},
      {"fio_drifted_pairs", sum.drifted}};
}

// The run with the median IOPS of one side of the pairs (ours or fio), as
// the table shows it.
IoRow MedianRun(const std::vector<Pair>& runs, IoRow Pair::*side) {
  std::vector<IoRow> rows;
  rows.reserve(runs.size());
  for (const Pair& p : runs) rows.push_back(p.*side);
  std::sort(rows.begin(), rows.end(),
            [](const IoRow& a, const IoRow& b) { return a.iops() < b.iops(); });
  IoRow r = rows[rows.size() / 2];
  r.note += " [median-IOPS run of " + std::to_string(runs.size()) + "]";
  return r;
}

// The no-disk rows' verdict and line: the library's own CPU per read with
// the ring and no disk, and the same on one CPU (when it could be pinned).
void AddNoDiskTargets(Report* rep) {
  if (const IoRow* nop = rep->FindIo("no-disk-uring-nop", 4096)) {
    // Seconds per 100k reads x 10 = microseconds per read.
    const double us = nop->cpu_s_per_100k() * 10;
    char line[200];
    std::snprintf(line, sizeof line,
                  "no-disk-uring-nop CPU per read = %.2f us, the library's "
                  "own cost with the ring and no disk (target <= 0.50 us)",
                  us);
    rep->AddVerdict(us <= 0.5, line);
  }
  const IoRow* one = rep->FindIo("no-disk-uring-nop-1cpu", 4096);
  if (one != nullptr && one->note.find("[on one CPU]") != std::string::npos) {
    char line[240];
    std::snprintf(line, sizeof line,
                  "  INFO  no-disk-uring-nop-1cpu CPU per read = %.2f us: the "
                  "same with the consumer and the ring thread on one CPU, "
                  "the library's work without the handoff between cores",
                  one->cpu_s_per_100k() * 10);
    rep->lines.push_back(line);
  }
}

}  // namespace

Result<PairSummary> RunPairs(const std::string& path, uint64_t block_size,
                             std::span<const Region> regions, int pairs,
                             Report* rep, nlohmann::json* json) {
  RANGEIO_ASSIGN_OR_RETURN(const std::vector<Pair> runs,
                           RunPairSides(path, block_size, regions, pairs));
  const PairSummary sum = Summarize(block_size, runs);
  AddPairLines(runs, sum, rep, json);
  rep->io_rows.push_back(MedianRun(runs, &Pair::ours));
  rep->io_rows.push_back(MedianRun(runs, &Pair::fio));
  return sum;
}

void AddTargets(Report* rep, bool have_fio,
                const std::vector<PairSummary>& sums) {
  const PairSummary* at4k = nullptr;
  const PairSummary* at1m = nullptr;
  for (const PairSummary& s : sums) {
    (s.block_size == 4096 ? at4k : at1m) = &s;
  }
  struct Target {
    const char* what;
    const PairSummary* sum;
    double PairSummary::*ratio;
    bool higher_is_better;
    double bound;
  };
  // The targets (#21); CPU per read at 1 MiB is kept from #7.
  const Target targets[] = {
      {"IOPS at 4 KiB", at4k, &PairSummary::iops_ratio, true, 1.0},
      {"CPU per read at 4 KiB", at4k, &PairSummary::cpu_ratio, false, 1.0},
      {"MiB/s at 1 MiB", at1m, &PairSummary::iops_ratio, true, 0.95},
      {"CPU per read at 1 MiB", at1m, &PairSummary::cpu_ratio, false, 1.5},
  };
  for (const Target& t : targets) {
    const std::string what =
        std::string("uring-direct / fio-uring-direct ") + t.what;
    if (!have_fio || t.sum == nullptr) {
      rep->AddSkipped(what, "fio missing: not compared");
      continue;
    }
    if (2 * t.sum->drifted > t.sum->pairs) {  // the peer did not hold still
      rep->AddSkipped(what, "fio drifted in " + std::to_string(t.sum->drifted) +
                                " of " + std::to_string(t.sum->pairs) +
                                " pairs: no verdict, measure on a quiet "
                                "machine");
      continue;
    }
    const double ratio = t.sum->*t.ratio;
    char line[220];
    std::snprintf(
        line, sizeof line, "%s = %.2f, median of the pairs (target %s %.2f)",
        what.c_str(), ratio, t.higher_is_better ? ">=" : "<=", t.bound);
    rep->AddVerdict(t.higher_is_better ? ratio >= t.bound : ratio <= t.bound,
                    line);
  }
  AddNoDiskTargets(rep);
}

}  // namespace rangeio::bench
