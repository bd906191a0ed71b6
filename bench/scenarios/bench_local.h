// bench_local.h (internal to bench/scenarios) — bench local's peer, fio,
// and what it needs to know about the disk under the test file.
#pragma once

#include <cstdint>
#include <string>

#include "bench_scenarios.h"

namespace rangeio::bench {

// fio's version ("fio-3.33"), or empty when fio cannot be run.
std::string FioVersion();

// fio's io_uring O_DIRECT random reads of `path` at `iodepth` and
// `block_size` for `seconds` (time-based), as a row named fio-uring-direct;
// an IoError naming the command when fio fails or prints no report.
Result<IoRow> RunFio(const std::string& path, uint64_t block_size,
                     uint32_t iodepth, int seconds);

// The device holding `path` when it is virtual (virtio, Xen, Hyper-V, a loop
// or RAM device): its host may serve "direct" reads from its own cache.
// Empty for a physical disk or when sysfs does not say.
std::string VirtualDevice(const std::string& path);

}  // namespace rangeio::bench
