// Limiter: global bounds shared by every reader and clone given it
// (invariants 1 and 2), fair service between streams, and O(1) pending
// state per stream however many ranges it asks for.
#include "rangeio/limiter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "rangeio/rangeio.h"
#include "support/gated_source.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

using testing::GatedSource;
using ::testing::HasSubstr;
using testing::LimitOptions;
using testing::OpenReader;
using testing::SpreadRanges;
using testing::StreamConsumer;
using testing::WaitUntil;

std::shared_ptr<Limiter> MakeLimiter(const Options& o) {
  auto l = Limiter::Make(o);
  EXPECT_TRUE(l.ok()) << l.status().ToString();
  return l.ok() ? *l : nullptr;
}

TEST(LimiterTest, MakeResolvesBudgets) {
  auto l = MakeLimiter(LimitOptions(3));
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->io_concurrency(), 3u);
  EXPECT_EQ(l->response_budget_count(), 6u);
  EXPECT_EQ(l->response_budget_bytes(),
            LimiterOptions::kDefaultResponseBudgetBytes);

  auto m = MakeLimiter(LimitOptions(5, 7, 4096));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->response_budget_count(), 7u);
  EXPECT_EQ(m->response_budget_bytes(), 4096u);

  Stats s = m->GetStats();
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.peak_in_flight, 0u);
  EXPECT_EQ(s.waiting_streams, 0u);
}

TEST(LimiterTest, MakeRejectsInvalidOptions) {
  for (Options o : {LimitOptions(0), LimitOptions(5000), LimitOptions(4, 0, 0),
                    LimitOptions(4, 2'000'000)}) {
    auto l = Limiter::Make(o);
    ASSERT_FALSE(l.ok()) << o.ToString();
    EXPECT_EQ(l.status().code(), StatusCode::kInvalidArgument);
  }
  auto l = Limiter::Make(LimitOptions(0));
  EXPECT_THAT(l.status().message(), HasSubstr("io-concurrency"));
}

TEST(LimiterTest, ReaderWithoutLimiterGetsItsOwn) {
  auto gate = GatedSource::Make("g", 1ull << 30);
  Reader a = OpenReader(gate, LimitOptions(3));
  Reader b = OpenReader(gate, LimitOptions(3));
  ASSERT_NE(a.limiter(), nullptr);
  EXPECT_NE(a.limiter(), b.limiter());
  EXPECT_EQ(a.limiter()->io_concurrency(), 3u);
}

// A shared limiter's bounds apply; limiter fields given to the reader are
// refused, naming them, rather than silently dropped.
TEST(LimiterTest, SharedLimiterRefusesReaderLimiterFields) {
  auto limiter = MakeLimiter(LimitOptions(2));
  auto gate = GatedSource::Make("g", 1ull << 36);
  auto refused = Reader::Open(gate, LimitOptions(50, 7), limiter);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("io-concurrency (alias read-thread-num)=50"));
  EXPECT_THAT(refused.status().message(), HasSubstr("response-budget-count=7"));
  Reader reader = OpenReader(gate, Options(), limiter);
  EXPECT_EQ(reader.limiter(), limiter);
  const auto ranges = SpreadRanges(10, 16);
  auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok());
  StreamConsumer consumer(std::move(*stream), ranges);
  ASSERT_TRUE(gate->WaitForOutstanding(2));
  testing::GiveThreadsAChance();
  EXPECT_EQ(gate->outstanding(), 2u);
  EXPECT_EQ(gate->reads_started(), 2u);
  gate->SetMode(GatedSource::Mode::kPassAsync);
  ASSERT_TRUE(consumer.WaitForDone());
  EXPECT_TRUE(consumer.final_status().ok());
  EXPECT_EQ(gate->peak_outstanding(), 2u);
  EXPECT_EQ(limiter->GetStats().peak_in_flight, 2u);
}

// Two limiters with different limits: each bounds its own readers, and one
// being full does not hold the other back.
TEST(LimiterTest, DifferentLimitersAreIndependent) {
  auto l2 = MakeLimiter(LimitOptions(2));
  auto l5 = MakeLimiter(LimitOptions(5));
  auto g2 = GatedSource::Make("two", 1ull << 36);
  auto g5 = GatedSource::Make("five", 1ull << 36);
  Reader r2 = OpenReader(g2, {}, l2);
  Reader r5 = OpenReader(g5, {}, l5);
  const auto ranges = SpreadRanges(20, 32);
  auto s2 = r2.ReadRanges(ranges, Delivery::kAsCompleted);
  auto s5 = r5.ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(s2.ok() && s5.ok());
  StreamConsumer c2(std::move(*s2), ranges);
  StreamConsumer c5(std::move(*s5), ranges);
  ASSERT_TRUE(g2->WaitForOutstanding(2));
  ASSERT_TRUE(g5->WaitForOutstanding(5));
  testing::GiveThreadsAChance();
  EXPECT_EQ(g2->outstanding(), 2u);
  EXPECT_EQ(g5->outstanding(), 5u);
  EXPECT_EQ(l2->GetStats().in_flight, 2u);
  EXPECT_EQ(l5->GetStats().in_flight, 5u);

  // With l2 full and held, l5's reader runs to the end.
  g5->SetMode(GatedSource::Mode::kPassAsync);
  ASSERT_TRUE(c5.WaitForDone());
  EXPECT_TRUE(c5.final_status().ok());
  EXPECT_EQ(c5.count(), 20u);
  EXPECT_EQ(g2->reads_started(), 2u);

  g2->SetMode(GatedSource::Mode::kPassAsync);
  ASSERT_TRUE(c2.WaitForDone());
  EXPECT_TRUE(c2.final_status().ok());
  EXPECT_EQ(c2.bad_bytes() + c5.bad_bytes(), 0u);
  EXPECT_EQ(g2->peak_outstanding(), 2u);
  EXPECT_EQ(g5->peak_outstanding(), 5u);
  EXPECT_EQ(l2->GetStats().peak_in_flight, 2u);
  EXPECT_EQ(l5->GetStats().peak_in_flight, 5u);
  EXPECT_LE(l2->GetStats().peak_retained_count, 4u);
  EXPECT_LE(l5->GetStats().peak_retained_count, 10u);
  EXPECT_EQ(l2->GetStats().ranges_delivered, 20u);
  EXPECT_EQ(l5->GetStats().ranges_delivered, 20u);
}

// Invariant 1 across clones: three clones sharing C = 1, each doing
// single-range reads from its own thread, never have more than one read in
// flight together. The gate releases one read at a time, so the other two
// threads are always queued behind it.
TEST(LimiterTest, ThreeClonesShareOnePermit) {
  constexpr int kThreads = 3;
  constexpr int kReadsPerThread = 15;
  auto gate = GatedSource::Make("shared", 1ull << 36);
  Reader base = OpenReader(gate, LimitOptions(1));
  std::vector<Reader> clones;
  for (int t = 0; t < kThreads; ++t) clones.push_back(base.Clone());
  for (const Reader& c : clones) EXPECT_EQ(c.limiter(), base.limiter());

  std::atomic<int> finished{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  // Joins the readers however the test body exits (a failed ASSERT lets the
  // gate go first so they can finish).
  struct JoinAll {
    std::vector<std::thread>& threads;
    ~JoinAll() {
      GatedSource::PassAllLiveGates();
      for (auto& t : threads) {
        if (t.joinable()) t.join();
      }
    }
  } join_all{threads};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kReadsPerThread; ++i) {
        ByteRange r{(uint64_t(t) * 1000 + i) << 20, 100 + uint64_t(t)};
        auto stream = clones[t].ReadRanges({&r, 1});
        if (!stream.ok()) {
          ++failures;
          continue;
        }
        auto d = testing::Drain(*stream, {&r, 1});
        if (!d.status.ok() || d.indexes != std::vector<size_t>{0} ||
            d.bad_bytes != 0) {
          ++failures;
        }
      }
      ++finished;
    });
  }
  // All three contend: one read in flight, two streams queued.
  ASSERT_TRUE(gate->WaitForOutstanding(1));
  EXPECT_TRUE(WaitUntil([&] {
    return base.limiter()->GetStats().waiting_streams == 2;
  })) << "waiting_streams="
      << base.limiter()->GetStats().waiting_streams;
  size_t max_waiting = 0;
  auto last_progress = std::chrono::steady_clock::now();
  while (finished.load() < kThreads) {
    if (std::chrono::steady_clock::now() - last_progress >
        testing::kHangGuard) {
      ADD_FAILURE() << "no read admitted within the hang guard; "
                    << gate->reads_started() << " reads so far";
      break;
    }
    if (gate->WaitFor([](const GatedSource& g) { return g.held() > 0; },
                      std::chrono::milliseconds(5))) {
      last_progress = std::chrono::steady_clock::now();
      Stats s = base.limiter()->GetStats();
      EXPECT_LE(s.in_flight, 1u);
      EXPECT_LE(s.retained_count, 2u);
      max_waiting = std::max<size_t>(max_waiting, s.waiting_streams);
      gate->ReleaseOldest();
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LE(max_waiting, 2u) << "more waiters than streams";
  EXPECT_EQ(gate->peak_outstanding(), 1u);
  EXPECT_EQ(gate->reads_started(), uint64_t(kThreads * kReadsPerThread));
  Stats s = base.limiter()->GetStats();
  EXPECT_EQ(s.peak_in_flight, 1u);
  EXPECT_LE(s.peak_retained_count, 2u);  // default budget 2C
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.retained_count, 0u);
  EXPECT_EQ(s.waiting_streams, 0u);
  EXPECT_EQ(base.GetStats().ranges_delivered,
            uint64_t(kThreads * kReadsPerThread));
}

// One huge request must not monopolise the limiter: a small stream that
// arrives while the huge one is queued is served within a couple of turns,
// not after the huge one's thousands of ranges.
TEST(LimiterTest, HugeRequestDoesNotStarveASmallOne) {
  auto limiter = MakeLimiter(LimitOptions(1, 64));
  auto big_gate = GatedSource::Make("big", 1ull << 40);
  auto small_gate = GatedSource::Make("small", 1ull << 40);
  Reader big = OpenReader(big_gate, {}, limiter);
  Reader small = OpenReader(small_gate, {}, limiter);
  const auto big_ranges = SpreadRanges(1000, 16);
  const auto small_ranges = SpreadRanges(3, 16);
  auto bs = big.ReadRanges(big_ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(bs.ok());
  StreamConsumer big_consumer(std::move(*bs), big_ranges);
  ASSERT_TRUE(big_gate->WaitForOutstanding(1));

  auto ss = small.ReadRanges(small_ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(ss.ok());
  StreamConsumer small_consumer(std::move(*ss), small_ranges);
  EXPECT_TRUE(WaitUntil([&] {
    return limiter->GetStats().waiting_streams == 2;
  })) << "both streams should be queued, as one entry each";

  // Release whatever is in flight, one read at a time. Round-robin serves
  // the small stream's 3 reads within 3 + 3 turns; FIFO would take 1,000.
  int turns = 0;
  std::string sequence;  // which stream each turn's read belonged to
  while (small_gate->reads_completed() < small_ranges.size() && turns < 12) {
    // Both consumers keep up (each has taken every completed result), so
    // neither stream is behind on delivery: the choice is pure turn order.
    ASSERT_TRUE(WaitUntil([&] {
      return big_gate->held() + small_gate->held() == 1 &&
             big_consumer.count() == big_gate->reads_completed() &&
             small_consumer.count() == small_gate->reads_completed();
    }));
    if (small_gate->held() == 1) {
      sequence += 's';
      small_gate->ReleaseOldest();
    } else {
      sequence += 'b';
      big_gate->ReleaseOldest();
    }
    ++turns;
    EXPECT_LE(big_gate->outstanding() + small_gate->outstanding(), 1u);
  }
  ASSERT_TRUE(small_consumer.WaitForDone(std::chrono::seconds(2)))
      << "small stream starved: " << small_consumer.count() << " of 3 after "
      << turns << " turns, big stream had " << big_gate->reads_started();
  EXPECT_TRUE(small_consumer.final_status().ok());
  EXPECT_LE(turns, 7) << "service order: " << sequence;
  EXPECT_LE(big_gate->reads_started(), 5u) << "service order: " << sequence;

  big_gate->SetMode(GatedSource::Mode::kPassAsync);
  ASSERT_TRUE(big_consumer.WaitForDone());
  EXPECT_TRUE(big_consumer.final_status().ok());
  EXPECT_EQ(big_consumer.count(), 1000u);
  EXPECT_EQ(big_consumer.bad_bytes(), 0u);
}

// A 100,000-range request is one waiter in the limiter, never 100,000: the
// source never sees more than C reads, the retained count stays within the
// budget, and waiting_streams stays <= 1 per stream throughout.
TEST(LimiterTest, HundredThousandRangesAreOneWaiter) {
  constexpr uint32_t kC = 16;
  constexpr size_t kRanges = 100'000;
  auto gate = GatedSource::Make("huge", 1ull << 50);
  Reader reader = OpenReader(gate, LimitOptions(kC));
  const auto ranges = SpreadRanges(kRanges, 8);
  auto stream = reader.ReadRanges(ranges, Delivery::kOrdered);
  ASSERT_TRUE(stream.ok());
  EXPECT_EQ(stream->size(), kRanges);
  StreamConsumer consumer(std::move(*stream), ranges);

  ASSERT_TRUE(gate->WaitForOutstanding(kC));
  testing::GiveThreadsAChance();
  Stats held = reader.limiter()->GetStats();
  EXPECT_LE(held.waiting_streams, 1u);
  EXPECT_EQ(held.in_flight, kC);
  EXPECT_EQ(gate->reads_started(), kC);

  // A second stream on a clone adds one waiter, not ten.
  Reader clone = reader.Clone();
  const auto more = SpreadRanges(10, 8, 1 << 20, 1ull << 45);
  auto s2 = clone.ReadRanges(more, Delivery::kAsCompleted);
  ASSERT_TRUE(s2.ok());
  StreamConsumer consumer2(std::move(*s2), more);
  testing::GiveThreadsAChance();
  EXPECT_LE(reader.limiter()->GetStats().waiting_streams, 2u);
  EXPECT_EQ(gate->outstanding(), kC);

  gate->SetMode(GatedSource::Mode::kPassAsync);
  uint64_t max_waiting = 0, max_retained = 0, max_in_flight = 0;
  while (!consumer.done()) {
    Stats s = reader.limiter()->GetStats();
    max_waiting = std::max(max_waiting, s.waiting_streams);
    max_retained = std::max(max_retained, s.retained_count);
    max_in_flight = std::max(max_in_flight, s.in_flight);
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  ASSERT_TRUE(consumer2.WaitForDone());
  EXPECT_TRUE(consumer.final_status().ok())
      << consumer.final_status().ToString();
  EXPECT_TRUE(consumer2.final_status().ok());
  EXPECT_LE(max_waiting, 2u);
  EXPECT_LE(max_retained, 2u * kC);
  EXPECT_LE(max_in_flight, kC);

  const auto idx = consumer.indexes();
  ASSERT_EQ(idx.size(), kRanges);
  for (size_t i = 0; i < kRanges; ++i) {
    ASSERT_EQ(idx[i], i) << "ordered delivery broken at " << i;
  }
  EXPECT_EQ(consumer.bad_bytes(), 0u);
  EXPECT_EQ(gate->reads_started(), kRanges + 10);  // one read per range
  EXPECT_EQ(gate->peak_outstanding(), kC);
  Stats s = reader.limiter()->GetStats();
  EXPECT_EQ(s.peak_in_flight, kC);
  EXPECT_LE(s.peak_retained_count, 2u * kC);
  EXPECT_EQ(s.waiting_streams, 0u);
  EXPECT_EQ(s.in_flight, 0u);
}

}  // namespace
}  // namespace rangeio
