// The process's deadline timer (src/util/deadline_timer.h): callbacks run
// in deadline order (ties in scheduling order), a cancelled one never runs,
// Cancel says whether it won, and a callback may schedule another.
#include "util/deadline_timer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <vector>

#include "support/test_util.h"
#include "util/clock.h"

namespace rangeio {
namespace {

using detail::DeadlineTimer;
using detail::NowNanos;

class Recorder {
 public:
  void Add(int v) {
    std::lock_guard<std::mutex> lock(mu_);
    got_.push_back(v);
  }
  std::vector<int> got() {
    std::lock_guard<std::mutex> lock(mu_);
    return got_;
  }
  size_t size() { return got().size(); }

 private:
  std::mutex mu_;
  std::vector<int> got_;
};

TEST(DeadlineTimerTest, RunsInDeadlineOrderTiesInSchedulingOrder) {
  auto rec = std::make_shared<Recorder>();
  DeadlineTimer& timer = DeadlineTimer::Get();
  const uint64_t base = NowNanos() + 20'000'000;  // all due together, later
  for (int v : {3, 1, 2}) {
    timer.Schedule(base + static_cast<uint64_t>(v) * 1'000'000,
                   [rec, v] { rec->Add(v); });
  }
  for (int v : {10, 11, 12}) {
    timer.Schedule(
        base + 5'000'000, [rec, v] { rec->Add(v); },
        DeadlineTimer::Precision::kPrecise);
  }
  ASSERT_TRUE(testing::WaitUntil([&] { return rec->size() == 6; }));
  EXPECT_EQ(rec->got(), (std::vector<int>{1, 2, 3, 10, 11, 12}));
}

TEST(DeadlineTimerTest, CancelBeforeItRunsWinsAfterItLoses) {
  auto rec = std::make_shared<Recorder>();
  DeadlineTimer& timer = DeadlineTimer::Get();
  const uint64_t later =
      timer.Schedule(NowNanos() + 60'000'000'000, [rec] { rec->Add(1); });
  const uint64_t now = timer.Schedule(NowNanos(), [rec] { rec->Add(2); });
  ASSERT_TRUE(testing::WaitUntil([&] { return rec->size() == 1; }));
  EXPECT_TRUE(timer.Cancel(later));
  EXPECT_FALSE(timer.Cancel(later));  // once only
  EXPECT_FALSE(timer.Cancel(now));    // it ran
  EXPECT_FALSE(timer.Cancel(0));      // never scheduled
  EXPECT_EQ(rec->got(), std::vector<int>{2});
}

TEST(DeadlineTimerTest, ACallbackSchedulesAnother) {
  auto rec = std::make_shared<Recorder>();
  DeadlineTimer& timer = DeadlineTimer::Get();
  timer.Schedule(NowNanos(), [rec, &timer] {
    rec->Add(1);
    timer.Schedule(NowNanos() + 1'000'000, [rec] { rec->Add(2); });
  });
  ASSERT_TRUE(testing::WaitUntil([&] { return rec->size() == 2; }));
  EXPECT_EQ(rec->got(), (std::vector<int>{1, 2}));
}

// A precise callback runs close to its deadline and never before it (the
// bound checked is the deadline itself, not a speed).
TEST(DeadlineTimerTest, NeverEarly) {
  std::atomic<uint64_t> ran{0};
  const uint64_t due = NowNanos() + 3'000'000;
  DeadlineTimer::Get().Schedule(
      due, [&ran] { ran = NowNanos(); }, DeadlineTimer::Precision::kPrecise);
  ASSERT_TRUE(testing::WaitUntil([&] { return ran.load() != 0; }));
  EXPECT_GE(ran.load(), due);
}

}  // namespace
}  // namespace rangeio
