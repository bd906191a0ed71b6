// bench_local.h (internal to bench/scenarios) — bench local's parts:
// its rows through rangeio (bench_local.cc), the uring-direct / fio pairs
// and the targets judged on them (bench_local_pairs.cc), and its peer, fio,
// with what it needs to know about the disk under the test file
// (bench_local_peers.cc).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bench_scenarios.h"

namespace rangeio::bench {

// What the parts share.
constexpr uint32_t kConcurrency = 64;  // docs/benchmarks.md: C = 64
// Per row: 10 rows of 3 s keep the whole run (with cache drops and fio's
// start-up) near a minute, while 3 s of 4 KiB reads is hundreds of thousands
// of reads: percentiles and rates settle well before that.
constexpr int kRowSeconds = 3;
// A pair whose fio IOPS is this far from the fio median ran on a different
// machine than the others (a neighbour's build, the host's cache warming).
constexpr double kFioDrift = 0.20;

// The part of the test file one run reads. A virtual disk's host may cache
// what a run read, so runs that read blocks an earlier run read measure that
// cache: at 4 KiB each run gets a region of its own.
struct Region {
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

// `file_bytes` split into `runs` disjoint regions of whole blocks, or the
// whole file for every run when a region would hold fewer than `min_blocks`
// blocks.
std::vector<Region> SplitFile(uint64_t file_bytes, uint64_t block_size,
                              size_t runs, uint64_t min_blocks);

// User + system CPU seconds from getrusage(`who`): RUSAGE_SELF (every
// thread of this process) or RUSAGE_CHILDREN (reaped children, e.g. fio).
double CpuSeconds(int who);

// Writes the simulated store's bytes (FillSimulatedBytes) to `path` unless
// it has exactly `file_bytes` already, and syncs them so that the cache can
// be dropped.
Status PrepareFile(const std::string& path, uint64_t file_bytes);

// Drops the first `file_bytes` of `path` from the page cache; returns the
// fraction of their pages still resident afterwards (mincore), so a warm
// "cold" row shows.
Result<double> DropCache(const std::string& path, uint64_t file_bytes);

// fio's version ("fio-3.33"), or empty when fio cannot be run.
std::string FioVersion();

// The CPU seconds of a fio run that reads one block: its start-up and exit,
// which RunFio subtracts from every run's.
Result<double> FioStartupCpu(const std::string& path, uint64_t block_size,
                             uint32_t iodepth);

// fio's io_uring O_DIRECT random reads of `path`'s `bytes` from `offset`
// at `iodepth` and `block_size` for `seconds` (time-based), as a row named
// fio-uring-direct whose CPU is that of fio's whole process tree, less
// `startup_cpu` (FioStartupCpu); an IoError naming the command when fio
// fails or prints no report.
Result<IoRow> RunFio(const std::string& path, uint64_t block_size,
                     uint32_t iodepth, int seconds, uint64_t offset,
                     uint64_t bytes, double startup_cpu);

// CPU seconds per 100k reads: the figure the CPU targets compare.
inline double CpuPerRead(const IoRow& r) { return r.cpu_s_per_100k(); }

// The medians over the pairs of one block size, as the verdicts use them.
struct PairSummary {
  uint64_t block_size = 0;
  double iops_ratio = 0;  // median of the per-pair ratios
  double iops_min = 0;
  double iops_max = 0;
  double cpu_ratio = 0;
  double cpu_min = 0;
  double cpu_max = 0;
  double fio_iops = 0;  // median
  int pairs = 0;
  int drifted = 0;  // pairs whose fio IOPS was kFioDrift off the median
};

// One uring-direct row (io_uring, O_DIRECT) through rangeio on `region` of
// `path`: the pairs' side that is ours (bench_local.cc).
Result<IoRow> RunUringDirect(const std::string& path, uint64_t block_size,
                             Region region);

// Runs `pairs` pairs of uring-direct and fio at `block_size`, each side on
// a region of its own (`regions`, in run order), adds the median rows (by
// IOPS) to the table and the per-pair lines under it, and the pairs'
// figures to `json` under the block size.
Result<PairSummary> RunPairs(const std::string& path, uint64_t block_size,
                             std::span<const Region> regions, int pairs,
                             Report* rep, nlohmann::json* json);

// The verdicts on the targets: uring-direct against fio (the pairs'
// medians, one summary per block size), and the no-disk rows' CPU per read.
void AddTargets(Report* rep, bool have_fio,
                const std::vector<PairSummary>& sums);

// The device holding `path` when it is virtual (virtio, Xen, Hyper-V, a loop
// or RAM device): its host may serve "direct" reads from its own cache.
// Empty for a physical disk or when sysfs does not say.
std::string VirtualDevice(const std::string& path);

}  // namespace rangeio::bench
