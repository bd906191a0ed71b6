// A simulated object store: reads complete at deadlines drawn from a latency
// model, on the process's deadline timer.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rangeio/planner.h"
#include "rangeio/sim.h"
#include "sim/latency_model.h"
#include "util/buffer_pool.h"
#include "util/clock.h"
#include "util/deadline_timer.h"
#include "util/mutex.h"

namespace rangeio {

namespace {
// splitmix64: a cheap, well-mixed function of the word index.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

std::byte SimulatedByteAt(uint64_t offset) {
  return static_cast<std::byte>(Mix(offset >> 3) >> (8 * (offset & 7)));
}

void FillSimulatedBytes(uint64_t offset, std::span<std::byte> out) {
  size_t i = 0;
  while (i < out.size() && ((offset + i) & 7) != 0) {
    out[i] = SimulatedByteAt(offset + i);
    ++i;
  }
  for (; i + 8 <= out.size(); i += 8) {
    const uint64_t w = Mix((offset + i) >> 3);
    std::memcpy(out.data() + i, &w, 8);  // little-endian, as SimulatedByteAt
  }
  for (; i < out.size(); ++i) out[i] = SimulatedByteAt(offset + i);
}

Status LatencyModel::Validate() const {
  if (base.count() < 0 || slow.count() < 0) {
    return Status::InvalidArgument(
        "latency model: base and slow latencies must be >= 0");
  }
  if (kind == Kind::kEveryKth && every == 0) {
    return Status::InvalidArgument(
        "latency model every-kth: every=0 is invalid, valid >= 1");
  }
  if (kind == Kind::kProbability && !(p >= 0.0 && p <= 1.0)) {
    return Status::InvalidArgument(
        "latency model probability: p=" + std::to_string(p) +
        " is invalid, valid 0..1");
  }
  if (kind == Kind::kMixture &&
      !(p >= 0.0 && p <= 1.0 && factor >= 1.0 && factor <= 1e6 &&
        sigma >= 0.0 && sigma <= 10.0)) {
    return Status::InvalidArgument(
        "latency model mixture: p=" + std::to_string(p) + ", factor=" +
        std::to_string(factor) + ", sigma=" + std::to_string(sigma) +
        " is invalid: valid p 0..1, factor 1..1e6, sigma 0..10");
  }
  if (kind == Kind::kLognormal && !(sigma >= 0.0 && sigma <= 10.0)) {
    return Status::InvalidArgument(
        "latency model lognormal: sigma=" + std::to_string(sigma) +
        " is invalid, valid 0..10");
  }
  return Status::OK();
}

LatencyModel LatencyModel::Fixed(std::chrono::nanoseconds base) {
  LatencyModel m;
  m.kind = Kind::kFixed;
  m.base = base;
  return m;
}
LatencyModel LatencyModel::EveryKth(std::chrono::nanoseconds base,
                                    std::chrono::nanoseconds slow,
                                    uint64_t every) {
  LatencyModel m;
  m.kind = Kind::kEveryKth;
  m.base = base;
  m.slow = slow;
  m.every = every;
  return m;
}
LatencyModel LatencyModel::Probability(std::chrono::nanoseconds base,
                                       std::chrono::nanoseconds slow,
                                       double p) {
  LatencyModel m;
  m.kind = Kind::kProbability;
  m.base = base;
  m.slow = slow;
  m.p = p;
  return m;
}
LatencyModel LatencyModel::Lognormal(std::chrono::nanoseconds median,
                                     double sigma) {
  LatencyModel m;
  m.kind = Kind::kLognormal;
  m.base = median;
  m.sigma = sigma;
  return m;
}

LatencyModel LatencyModel::Mixture(std::chrono::nanoseconds median,
                                   double sigma, double p, double factor) {
  LatencyModel m = Lognormal(median, sigma);
  m.kind = Kind::kMixture;
  m.p = p;
  m.factor = factor;
  return m;
}

namespace {

detail::DelayModel ToDelayModel(const LatencyModel& m) {
  detail::DelayModel d;
  switch (m.kind) {
    case LatencyModel::Kind::kFixed:
      d.kind = detail::DelayModel::Kind::kFixed;
      break;
    case LatencyModel::Kind::kEveryKth:
      d.kind = detail::DelayModel::Kind::kEveryKth;
      break;
    case LatencyModel::Kind::kProbability:
      d.kind = detail::DelayModel::Kind::kProbability;
      break;
    case LatencyModel::Kind::kLognormal:
      d.kind = detail::DelayModel::Kind::kLognormal;
      break;
    case LatencyModel::Kind::kMixture:
      d.kind = detail::DelayModel::Kind::kMixture;
      break;
  }
  d.base = static_cast<double>(m.base.count());
  d.slow = static_cast<double>(m.slow.count());
  d.every = m.every;
  d.p = m.p;
  d.sigma = m.sigma;
  d.factor = m.factor;
  return d;
}

// The reads of one simulated source waiting for their deadlines on the
// process's timer, by (sink, tag), so that Cancel can find them. Timer
// callbacks hold it weakly: a read completes even once its source is gone.
class PendingReads {
 public:
  // Schedules `fire` at `due_ns` as the read (sink, tag), filed under the
  // lock that the read's Remove takes, so that it is filed before it fires.
  void Schedule(ReadSink* sink, uint64_t tag, uint64_t due_ns,
                std::function<void()> fire) EXCLUDES(mu_) {
    detail::MutexLock lk(mu_);
    ids_[{sink, tag}] = detail::DeadlineTimer::Get().Schedule(
        due_ns, std::move(fire), detail::DeadlineTimer::Precision::kPrecise);
  }
  void Remove(ReadSink* sink, uint64_t tag) EXCLUDES(mu_) {
    detail::MutexLock lk(mu_);
    ids_.erase({sink, tag});
  }
  // The timer ids of (sink, tag), or of every read of `sink` with
  // Source::kAllReads, taken out of the table.
  std::vector<std::pair<uint64_t, uint64_t>> Take(ReadSink* sink, uint64_t tag)
      EXCLUDES(mu_) {
    std::vector<std::pair<uint64_t, uint64_t>> out;  // (tag, timer id)
    detail::MutexLock lk(mu_);
    for (auto it = ids_.begin(); it != ids_.end();) {
      if (it->first.first != sink ||
          (tag != Source::kAllReads && it->first.second != tag)) {
        ++it;
        continue;
      }
      out.emplace_back(it->first.second, it->second);
      it = ids_.erase(it);
    }
    return out;
  }

 private:
  struct KeyHash {
    size_t operator()(const std::pair<ReadSink*, uint64_t>& k) const {
      return std::hash<const void*>()(k.first) ^
             (k.second * 0x9E3779B97F4A7C15ull);
    }
  };
  detail::Mutex mu_;
  std::unordered_map<std::pair<ReadSink*, uint64_t>, uint64_t, KeyHash> ids_
      GUARDED_BY(mu_);
};

// Completes a simulated read with its bytes (an allocation failure is the
// read's error: nothing may escape the timer thread).
void CompleteSimulatedRead(ByteRange range, ReadSink* sink, uint64_t tag) {
  std::byte* dst = nullptr;
  Result<Slice> bytes = detail::TryAllocateSlice(range.length, &dst,
                                                 "reading " + range.ToString());
  if (bytes.ok()) FillSimulatedBytes(range.offset, {dst, range.length});
  sink->OnReadDone(tag, std::move(bytes));
}

class SimulatedSource final : public Source {
 public:
  SimulatedSource(std::string name, uint64_t size, LatencyModel model)
      : name_(std::move(name)),
        size_(size),
        model_(model),
        delay_(ToDelayModel(model)),
        rng_(model.seed) {}

  const std::string& name() const override { return name_; }
  Result<uint64_t> Size() override { return size_; }
  // It models an object store, so it plans like one.
  SourceInfo Info() const override {
    return {name_, PlannerOptions::ObjectStore(), {}};
  }

  void Read(ByteRange range, ReadSink* sink, uint64_t tag) override {
    if (range.end() > size_) {
      sink->OnReadDone(tag, range.CheckWithin(size_, name_));
      return;
    }
    const uint64_t due =
        detail::NowNanos() +
        static_cast<uint64_t>(NextLatency(range.length).count());
    pending_->Schedule(
        sink, tag, due,
        [pending = std::weak_ptr<PendingReads>(pending_), range, sink, tag] {
          if (auto p = pending.lock()) p->Remove(sink, tag);
          CompleteSimulatedRead(range, sink, tag);
        });
  }

  // A read whose deadline has not come completes now with Cancelled; one
  // whose timer already fired completes as usual.
  void Cancel(ReadSink* sink, uint64_t tag) override {
    for (const auto& [t, id] : pending_->Take(sink, tag)) {
      if (detail::DeadlineTimer::Get().Cancel(id)) {
        sink->OnReadDone(t, Status::Cancelled("simulated read cancelled"));
      }
    }
  }

 private:
  std::chrono::nanoseconds NextLatency(uint64_t bytes) EXCLUDES(mu_) {
    detail::MutexLock lk(mu_);
    const uint64_t n = reads_++;
    // Delay calls these only here, under mu_.
    auto uniform = [this] {
      mu_.AssertHeld();
      return std::uniform_real_distribution<double>(0, 1)(rng_);
    };
    auto normal = [this] {
      mu_.AssertHeld();
      return std::normal_distribution<double>(0, 1)(rng_);
    };
    std::chrono::nanoseconds lat(
        static_cast<int64_t>(delay_.Delay(n, uniform, normal)));
    if (model_.bytes_per_second != 0) {
      lat += std::chrono::nanoseconds(
          static_cast<int64_t>(static_cast<double>(bytes) * 1e9 /
                               static_cast<double>(model_.bytes_per_second)));
    }
    return lat;
  }

  const std::string name_;
  const uint64_t size_;
  const LatencyModel model_;
  const detail::DelayModel delay_;  // model_ in nanoseconds
  detail::Mutex mu_;
  std::mt19937_64 rng_ GUARDED_BY(mu_);
  uint64_t reads_ GUARDED_BY(mu_) = 0;
  const std::shared_ptr<PendingReads> pending_ =
      std::make_shared<PendingReads>();
};

}  // namespace

Result<std::shared_ptr<Source>> MakeSimulatedSource(std::string name,
                                                    uint64_t size,
                                                    LatencyModel model) {
  RANGEIO_RETURN_NOT_OK(model.Validate());
  return std::shared_ptr<Source>(
      std::make_shared<SimulatedSource>(std::move(name), size, model));
}

}  // namespace rangeio
