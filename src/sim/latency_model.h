// latency_model.h (internal) — the per-request delay that the simulated store
// (sim/simulated_source.cc) and the latency relay
// (tests/servers/latency_relay.cc) both add, so that one model is written
// once. Header-only: the relay does not link librangeio.
// tests/servers/faultproxy.js has the same model and PRNG in JavaScript.
//
// Thread-safety: DelayModel is a value; a Mulberry32 and the uniform source
// passed to Delay belong to one thread (or one mutex) at a time.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

namespace rangeio::detail {

// mulberry32, as in faultproxy.js, so that one seed gives the relay and the
// Node proxy the same delays.
class Mulberry32 {
 public:
  explicit Mulberry32(uint32_t seed) : a_(seed) {}

  // Uniform in [0, 1).
  double Next() {
    a_ += 0x6d2b79f5u;
    uint32_t t = a_;
    t = (t ^ (t >> 15)) * (t | 1u);
    t ^= t + (t ^ (t >> 7)) * (t | 61u);
    return static_cast<double>(t ^ (t >> 14)) / 4294967296.0;
  }

 private:
  uint32_t a_;
};

// Box-Muller: a standard normal from two uniforms in [0, 1), for a caller
// with no normal distribution of its own (the relay, as faultproxy.js).
template <typename Uniform>
double NormalFromUniforms(Uniform&& uniform) {
  const double u = 1 - uniform();  // in (0, 1], so log(u) is finite
  const double v = uniform();
  return std::sqrt(-2 * std::log(u)) * std::cos(2 * std::numbers::pi * v);
}

// The delay added to request n; `base` and `slow` in any unit (the delay
// comes back in it): nanoseconds in the simulated store, milliseconds in the
// relay.
struct DelayModel {
  enum class Kind {
    kFixed,        // every request takes `base`
    kEveryKth,     // request n takes `slow` when n % every == every - 1
    kProbability,  // each request takes `slow` with probability p
    kLognormal,    // median `base`, log-space standard deviation `sigma`
    kMixture,      // kLognormal, then x `factor` with probability p: a
                   // lognormal body with a straggler tail (issue 17)
  };
  Kind kind = Kind::kFixed;
  double base = 0;
  double slow = 0;
  uint64_t every = 1;  // >= 1
  double p = 0;
  double sigma = 0;
  double factor = 1;  // kMixture's straggler multiplier

  // The delay of request n (0-based, in submission order). `uniform()`
  // returns doubles uniform in [0, 1) and `normal()` standard normal ones;
  // they are called only by the random kinds.
  template <typename Uniform, typename Normal>
  double Delay(uint64_t n, Uniform&& uniform, Normal&& normal) const {
    switch (kind) {
      case Kind::kFixed:
        return base;
      case Kind::kEveryKth:
        return n % every == every - 1 ? slow : base;
      case Kind::kProbability:
        return uniform() < p ? slow : base;
      case Kind::kLognormal:
        return base * std::exp(sigma * normal());
      case Kind::kMixture: {
        const double body = base * std::exp(sigma * normal());
        return uniform() < p ? body * factor : body;
      }
    }
    return base;
  }
};

}  // namespace rangeio::detail
