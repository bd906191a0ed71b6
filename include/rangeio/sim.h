// rangeio/sim.h — a simulated object store with a latency model.
//
// For benchmarks and tests: a Source of `size` bytes whose content is a pure
// function of the offset (SimulatedByteAt) and whose reads complete after a
// delay drawn from a LatencyModel. One timer thread per source keeps a heap of
// deadlines and completes each read at its deadline (sub-millisecond
// precision); there is no sleeping thread per read.
//
// Thread-safety: as Source.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "rangeio/export.h"
#include "rangeio/source.h"

namespace rangeio {

struct RANGEIO_EXPORT LatencyModel {
  enum class Kind {
    kFixed,        // every read takes `base`
    kEveryKth,     // read number n (0-based, in submission order) takes
                   // `slow` when n % every == every - 1, else `base`
    kProbability,  // each read takes `slow` with probability p, else `base`
    kLognormal,    // median `base`, log-space standard deviation `sigma`
    kMixture,      // kLognormal, and with probability p a straggler that
                   // takes `factor` times as long (S3-like tails)
  };
  Kind kind = Kind::kFixed;
  std::chrono::nanoseconds base{std::chrono::milliseconds(1)};
  std::chrono::nanoseconds slow{std::chrono::milliseconds(10)};
  uint64_t every = 64;
  double p = 0.0;
  double sigma = 0.5;
  double factor = 10.0;  // kMixture only
  // Transfer time added per byte read: 0 = infinite bandwidth.
  uint64_t bytes_per_second = 0;
  uint64_t seed = 42;

  Status Validate() const;

  static LatencyModel Fixed(std::chrono::nanoseconds base);
  static LatencyModel EveryKth(std::chrono::nanoseconds base,
                               std::chrono::nanoseconds slow, uint64_t every);
  static LatencyModel Probability(std::chrono::nanoseconds base,
                                  std::chrono::nanoseconds slow, double p);
  static LatencyModel Lognormal(std::chrono::nanoseconds median, double sigma);
  static LatencyModel Mixture(std::chrono::nanoseconds median, double sigma,
                              double p, double factor);
};

// The byte the simulated store holds at `offset`.
RANGEIO_EXPORT std::byte SimulatedByteAt(uint64_t offset);
// Fills `out` with the simulated bytes starting at `offset`.
RANGEIO_EXPORT void FillSimulatedBytes(uint64_t offset,
                                       std::span<std::byte> out);

// InvalidArgument when the model is invalid.
RANGEIO_EXPORT Result<std::shared_ptr<Source>> MakeSimulatedSource(
    std::string name, uint64_t size, LatencyModel model);

}  // namespace rangeio
