// bench_local.h (internal to bench/scenarios) — bench local's peer, fio,
// and what it needs to know about the disk under the test file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_scenarios.h"

namespace rangeio::bench {

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

// The device holding `path` when it is virtual (virtio, Xen, Hyper-V, a loop
// or RAM device): its host may serve "direct" reads from its own cache.
// Empty for a physical disk or when sysfs does not say.
std::string VirtualDevice(const std::string& path);

}  // namespace rangeio::bench
