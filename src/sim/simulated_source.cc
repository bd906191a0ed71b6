// A simulated object store: reads complete at deadlines drawn from a latency
// model, all driven by one timer thread per source.
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "util/buffer_pool.h"
#include "util/mutex.h"
#include "rangeio/planner.h"
#include "rangeio/sim.h"
#include "sim/latency_model.h"
#include "util/thread_name.h"

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

using Clock = std::chrono::steady_clock;

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

struct Pending {
  Clock::time_point deadline;
  uint64_t seq;  // FIFO among equal deadlines
  ByteRange range;
  ReadSink* sink;
  uint64_t tag;
  bool operator>(const Pending& o) const {
    return deadline != o.deadline ? deadline > o.deadline : seq > o.seq;
  }
};

// The timer: a min-heap of deadlines served by one thread. The thread holds
// a shared_ptr to it, so the last reference may drop on the thread itself.
class Timer : public std::enable_shared_from_this<Timer> {
 public:
  void Start() {
    thread_ = std::thread([self = shared_from_this()] {
      detail::NameThisThread("rio-sim-timer");
      self->Run();
    });
  }

  void Add(Pending p) EXCLUDES(mu_) {
    bool wake = false;
    {
      detail::MutexLock lk(mu_);
      p.seq = seq_++;
      wake = heap_.empty() || p.deadline < heap_.front().deadline;
      heap_.push_back(p);
      std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
    }
    if (wake) cv_.NotifyOne();
  }

  // Drops the timers of (sink, tag), or of every read of `sink` with
  // Source::kAllReads, still pending and completes those reads at once with
  // Cancelled. O(pending reads): a hedge's loser or a cancelled stream, not
  // a hot path.
  void Cancel(ReadSink* sink, uint64_t tag) EXCLUDES(mu_) {
    std::vector<uint64_t> tags;
    {
      detail::MutexLock lk(mu_);
      auto match = [&](const Pending& p) {
        return p.sink == sink && (tag == Source::kAllReads || p.tag == tag);
      };
      for (const Pending& p : heap_) {
        if (match(p)) tags.push_back(p.tag);
      }
      if (tags.empty()) return;
      std::erase_if(heap_, match);
      std::make_heap(heap_.begin(), heap_.end(), std::greater<>());
    }
    for (uint64_t t : tags) {
      sink->OnReadDone(t, Status::Cancelled("simulated read cancelled"));
    }
  }

  void Stop() EXCLUDES(mu_) {
    {
      detail::MutexLock lk(mu_);
      stop_ = true;
    }
    cv_.NotifyOne();
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();
    } else if (thread_.joinable()) {
      thread_.join();
    }
  }

 private:
  // A futex wake-up on a timer lands tens of microseconds late on a VM,
  // which adds up along a chain of reads (bench straggler's 1 ms reads). So
  // the thread sleeps until this long before a deadline and yields in a
  // loop for the rest.
  static constexpr std::chrono::microseconds kSpinWindow{200};

  void Run() EXCLUDES(mu_) {
    // Deadlines are sub-millisecond: ask the kernel not to coalesce this
    // thread's wake-ups (the default slack is 50 us).
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    detail::MutexLock lk(mu_);
    while (!stop_) {
      if (heap_.empty()) {
        cv_.Wait(lk);
        continue;
      }
      const Clock::time_point due = heap_.front().deadline;
      const Clock::time_point now = Clock::now();
      if (now < due - kSpinWindow) {
        cv_.WaitFor(lk, due - kSpinWindow - now);
        continue;
      }
      if (now < due) {
        // Inside the spin window: yield the core (without the lock, so reads
        // can still be added) and look again.
        lk.Unlock();
        std::this_thread::yield();
        lk.Lock();
        continue;
      }
      std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
      Pending p = heap_.back();
      heap_.pop_back();
      lk.Unlock();
      std::byte* dst = nullptr;
      // An allocation failure is the read's error: nothing may escape this
      // thread.
      Result<Slice> bytes = detail::TryAllocateSlice(
          p.range.length, &dst, "reading " + p.range.ToString());
      if (bytes.ok()) FillSimulatedBytes(p.range.offset, {dst, p.range.length});
      p.sink->OnReadDone(p.tag, std::move(bytes));
      lk.Lock();
    }
  }

  detail::Mutex mu_;
  detail::CondVar cv_;
  // A min-heap (std::push_heap with std::greater) that Cancel can search.
  std::vector<Pending> heap_ GUARDED_BY(mu_);
  uint64_t seq_ GUARDED_BY(mu_) = 0;
  bool stop_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

class SimulatedSource final : public Source {
 public:
  SimulatedSource(std::string name, uint64_t size, LatencyModel model)
      : name_(std::move(name)),
        size_(size),
        model_(model),
        delay_(ToDelayModel(model)),
        rng_(model.seed),
        timer_(std::make_shared<Timer>()) {
    timer_->Start();
  }
  ~SimulatedSource() override { timer_->Stop(); }

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
    const auto deadline = Clock::now() + NextLatency(range.length);
    timer_->Add({deadline, 0, range, sink, tag});
  }

  void Cancel(ReadSink* sink, uint64_t tag) override {
    timer_->Cancel(sink, tag);
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
  const std::shared_ptr<Timer> timer_;
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
