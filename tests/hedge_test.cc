// Hedged reads (Options::hedge): the options, exactly-once delivery when the
// hedge wins, loses or ties, the loser cancelled in the backend, a stream
// cancelled with hedges out, the budget and the hedge reserve as bounds.
// Reads are held in a GatedSource, so which copy answers first is the
// test's choice, not a race; nothing here asserts a speed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <thread>
#include <vector>

#include "rangeio/rangeio.h"
#include "rangeio/sim.h"
#include "sim/latency_model.h"
#include "stream/hedge_policy.h"
#include "stream/latency_tracker.h"
#include "support/collecting_sink.h"
#include "support/gated_source.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

using std::chrono::milliseconds;
using testing::GatedSource;
using testing::MatchesPattern;

TEST(HedgeOptionsTest, ParsesModesAndBudget) {
  auto o = Options::Parse("hedge=auto,hedge-budget=0.1");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->reader.hedge, ReaderOptions::Hedge::kAuto);
  EXPECT_DOUBLE_EQ(o->reader.hedge_budget, 0.1);
  o = Options::Parse("hedge=2.5ms");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->reader.hedge, ReaderOptions::Hedge::kFixed);
  EXPECT_EQ(o->reader.hedge_after.count(), 2500);
  o = Options::Parse("hedge=250us");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->reader.hedge_after.count(), 250);
  o = Options::Parse("hedge=off");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->reader.hedge, ReaderOptions::Hedge::kOff);
  EXPECT_EQ(Options().reader.hedge, ReaderOptions::Hedge::kOff);
  // ToString round-trips.
  auto fixed = Options::Parse("hedge=40ms,hedge-budget=0.02");
  ASSERT_TRUE(fixed.ok());
  auto again = Options::Parse(fixed->ToString());
  ASSERT_TRUE(again.ok()) << fixed->ToString();
  EXPECT_EQ(again->reader.hedge_after, fixed->reader.hedge_after);
  EXPECT_DOUBLE_EQ(again->reader.hedge_budget, 0.02);
}

TEST(HedgeOptionsTest, RejectsBadValuesNamingThem) {
  for (const char* bad :
       {"hedge=sometimes", "hedge=10", "hedge=ms", "hedge=0ms", "hedge=61s",
        "hedge=1.5.2ms", "hedge-budget=1.5", "hedge-budget=-0.1",
        "hedge-budget=x", "hedge-budget="}) {
    auto o = Options::Parse(bad);
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument);
    const std::string key(bad, std::string_view(bad).find('='));
    EXPECT_NE(o.status().message().find(key), std::string::npos)
        << o.status().ToString();
  }
  Options o;
  o.reader.hedge = ReaderOptions::Hedge::kFixed;  // with no delay
  EXPECT_FALSE(o.Validate().ok());
  o.reader.hedge_after = std::chrono::microseconds(100);
  EXPECT_TRUE(o.Validate().ok());
  o.reader.hedge_budget = 2;
  EXPECT_FALSE(o.Validate().ok());
}

// The mixture the relay and the simulated store share: the lognormal body,
// times `factor` when the uniform draw falls under p.
TEST(MixtureModelTest, StragglerIsTheBodyTimesTheFactor) {
  detail::DelayModel m;
  m.kind = detail::DelayModel::Kind::kMixture;
  m.base = 24;
  m.sigma = 0.3;
  m.p = 0.01;
  m.factor = 10;
  auto zero = [] { return 0.0; };  // the median of the body
  EXPECT_DOUBLE_EQ(m.Delay(
                       0, [] { return 0.5; }, zero),
                   24);
  EXPECT_DOUBLE_EQ(m.Delay(
                       0, [] { return 0.005; }, zero),
                   240);
  EXPECT_DOUBLE_EQ(m.Delay(
                       0, [] { return 0.5; }, [] { return 1.0; }),
                   24 * std::exp(0.3));
  auto model = LatencyModel::Mixture(milliseconds(24), 0.3, 0.01, 10);
  EXPECT_TRUE(model.Validate().ok());
  model.factor = 0.5;
  EXPECT_FALSE(model.Validate().ok());
  model = LatencyModel::Mixture(milliseconds(24), 0.3, 1.5, 10);
  EXPECT_FALSE(model.Validate().ok());
}

// The auto delay's histogram: a percentile within its bucket, and old
// samples fading after a half-life.
TEST(LatencyTrackerTest, PercentileAndDecay) {
  detail::LatencyTracker t;
  EXPECT_EQ(t.Percentile(0.98), 0u);
  for (int i = 0; i < 98; ++i) t.Record(1'000'000);
  for (int i = 0; i < 2; ++i) t.Record(100'000'000);
  const uint64_t p98 = t.Percentile(0.98);
  EXPECT_GE(p98, 1'000'000u);
  EXPECT_LE(p98, 1'070'000u);  // 6.25% bucket error
  EXPECT_GE(t.Percentile(0.995), 100'000'000u);
  // A half-life of 20 ms samples: the 1 ms ones now weigh half as much.
  for (uint32_t i = 0; i < detail::LatencyTracker::kHalfLife; ++i) {
    t.Record(20'000'000);
  }
  EXPECT_LT(t.weight(), 100u + detail::LatencyTracker::kHalfLife);
  EXPECT_GE(t.Percentile(0.5), 20'000'000u);
}

TEST(HedgeOptionsTest, ReserveIsBudgetTimesConcurrency) {
  Options o;
  o.limiter.io_concurrency = 64;
  EXPECT_EQ(o.ResolvedLimiter().hedge_reserve, 4u);  // ceil(64 x 0.05)
  o.reader.hedge_budget = 0;
  EXPECT_EQ(o.ResolvedLimiter().hedge_reserve, 1u);
  o.reader.hedge_budget = 1;
  EXPECT_EQ(o.ResolvedLimiter().hedge_reserve, 64u);
}

// A reader of `gate` hedging every read after `after` (budget 1: every
// read may be hedged) with io_concurrency `c`.
Reader HedgingReader(const std::shared_ptr<Source>& gate, uint32_t c = 8,
                     double budget = 1.0,
                     std::shared_ptr<Limiter> limiter = nullptr,
                     std::chrono::microseconds after = milliseconds(1)) {
  Options o;
  o.limiter.io_concurrency = c;
  o.reader.hedge = ReaderOptions::Hedge::kFixed;
  o.reader.hedge_after = after;
  o.reader.hedge_budget = budget;
  o.reader.planner = PlannerOptions::None();
  auto r = limiter ? Reader::Open(gate, o.reader, std::move(limiter))
                   : Reader::Open(gate, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return *r;
}

// Waits for every held read to settle and checks the limiter is empty.
void ExpectLimiterDrained(const Reader& reader) {
  const Stats s = reader.limiter()->GetStats();
  EXPECT_EQ(s.in_flight, 0u);
  EXPECT_EQ(s.retained_count, 0u);
  EXPECT_EQ(s.retained_bytes, 0u);
}

enum class Winner { kPrimary, kHedge, kTie };

class HedgeRaceTest : public ::testing::TestWithParam<Winner> {};

TEST_P(HedgeRaceTest, DeliversOnceAndCancelsTheLoser) {
  auto gate = GatedSource::Make("gate", 1 << 20);
  Reader reader = HedgingReader(gate);
  const ByteRange range{4096, 1000};
  auto stream = reader.ReadRanges({&range, 1});
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(gate->WaitForHeld(2)) << "the hedge was not issued";
  switch (GetParam()) {
    case Winner::kPrimary:
      ASSERT_TRUE(gate->ReleaseOldest(1));
      break;
    case Winner::kHedge:
      ASSERT_TRUE(gate->ReleaseNewest());
      break;
    case Winner::kTie: {
      // Both answer at once, on two threads; the gate's Cancel may find
      // the other still held or already released: either way one result.
      std::thread other([&] { gate->ReleaseOldest(1); });
      gate->ReleaseNewest();
      other.join();
      break;
    }
  }
  auto r = stream->Next();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->index, 0u);
  EXPECT_TRUE(MatchesPattern(range, (*r)->bytes.span()));
  r->reset();
  auto end = stream->Next();
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());
  EXPECT_EQ(gate->held(), 0u);
  ASSERT_TRUE(gate->WaitForOutstanding(0));
  if (GetParam() != Winner::kTie) {
    EXPECT_EQ(gate->cancelled(), 1u);
  }
  const Stats s = reader.GetStats();
  EXPECT_EQ(s.hedges_issued, 1u);
  EXPECT_EQ(s.hedged_bytes, 1000u);
  if (GetParam() != Winner::kTie) {
    EXPECT_EQ(s.hedges_won, GetParam() == Winner::kHedge ? 1u : 0u);
  }
  EXPECT_LE(s.hedges_won, 1u);
  EXPECT_EQ(s.physical_reads, 1u);
  EXPECT_EQ(s.ranges_delivered, 1u);
  ExpectLimiterDrained(reader);
  EXPECT_EQ(reader.limiter()->GetStats().hedges_issued, 1u);
}

INSTANTIATE_TEST_SUITE_P(Winners, HedgeRaceTest,
                         ::testing::Values(Winner::kPrimary, Winner::kHedge,
                                           Winner::kTie));

TEST(HedgeTest, FailedPrimaryWaitsForTheHedge) {
  auto gate = GatedSource::Make("gate", 1 << 20);
  Reader reader = HedgingReader(gate);
  const ByteRange range{0, 100};
  auto stream = reader.ReadRanges({&range, 1});
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(gate->WaitForHeld(2));
  gate->FailOffset(0);
  ASSERT_TRUE(gate->ReleaseOldest(1));  // the primary fails...
  ASSERT_EQ(gate->held(), 1u);          // ...and the hedge is still out
  // Both copies of one read fail: the error is delivered once.
  ASSERT_TRUE(gate->ReleaseOldest(1));
  auto r = stream->Next();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIoError);
  ExpectLimiterDrained(reader);
}

TEST(HedgeTest, CancelledStreamWithHedgesOutstanding) {
  auto gate = GatedSource::Make("gate", 1 << 20);
  std::vector<ByteRange> ranges;
  for (uint64_t i = 0; i < 8; ++i) ranges.push_back({i * 4096, 4096});
  {
    Reader reader = HedgingReader(gate);
    auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
    ASSERT_TRUE(stream.ok());
    ASSERT_TRUE(gate->WaitForHeld(16)) << "not every read was hedged";
    const Stats during = reader.limiter()->GetStats();
    EXPECT_EQ(during.in_flight, 16u);
    stream->Cancel();
    // The reader, its source handle and its limiter go while 16 reads are
    // still in the backend.
  }
  gate->ReleaseOldest(5);
  gate->ReleaseAll();
  ASSERT_TRUE(gate->WaitForOutstanding(0));
  EXPECT_EQ(gate->held(), 0u);
}

// Source::CancelReads through the hedge layer: a cancelled stream's reads,
// both copies, are cancelled in the backend at once (issue 16's rule that a
// cancel frees permits without waiting for the backend holds with hedging).
TEST(HedgeTest, CancelledStreamCancelsBothCopiesInTheBackend) {
  auto gate = GatedSource::Make("gate", 1 << 20);
  std::vector<ByteRange> ranges;
  for (uint64_t i = 0; i < 8; ++i) ranges.push_back({i * 4096, 4096});
  Reader reader = HedgingReader(gate);
  auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(gate->WaitForHeld(16)) << "not every read was hedged";
  stream->Cancel();
  EXPECT_EQ(gate->cancelled(), 16u);
  EXPECT_EQ(gate->held(), 0u);
  ASSERT_TRUE(gate->WaitForOutstanding(0));
  ExpectLimiterDrained(reader);
}

TEST(HedgeTest, ReserveBoundsHedgesInFlight) {
  auto gate = GatedSource::Make("gate", 1 << 20);
  Options lo;
  lo.limiter.io_concurrency = 20;
  lo.reader.hedge_budget = 0.05;  // reserve: ceil(20 x 0.05) = 1
  auto limiter = Limiter::Make(lo);
  ASSERT_TRUE(limiter.ok());
  Reader reader = HedgingReader(gate, 20, 1.0, *limiter);
  std::vector<ByteRange> ranges;
  for (uint64_t i = 0; i < 20; ++i) ranges.push_back({i * 100, 100});
  auto stream = reader.ReadRanges(ranges);
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(gate->WaitForHeld(21));
  // Every deadline passes while everything is held; the reserve admits one.
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(gate->held(), 21u);
  const Stats s = (*limiter)->GetStats();
  EXPECT_EQ(s.peak_in_flight, 21u);
  EXPECT_EQ(s.peak_retained_count, 21u);
  gate->ReleaseAll();
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto r = stream->Next();
    ASSERT_TRUE(r.ok() && r->has_value());
    EXPECT_EQ((*r)->index, i);
  }
  ASSERT_TRUE(gate->WaitForOutstanding(0));
  ExpectLimiterDrained(reader);
}

TEST(HedgeTest, BudgetIsNeverExceeded) {
  auto gate = GatedSource::Make("gate", 1 << 20);
  Options lo;
  lo.limiter.io_concurrency = 100;
  lo.reader.hedge_budget = 1.0;  // a reserve of 100: only the budget binds
  auto limiter = Limiter::Make(lo);
  ASSERT_TRUE(limiter.ok());
  Reader reader = HedgingReader(gate, 100, 0.1, *limiter);
  std::vector<ByteRange> ranges;
  for (uint64_t i = 0; i < 100; ++i) ranges.push_back({i * 100, 100});
  auto stream = reader.ReadRanges(ranges);
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(gate->WaitForHeld(110));
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(gate->held(), 110u);  // 10% of 100 reads, not one more
  gate->ReleaseAll();
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto r = stream->Next();
    ASSERT_TRUE(r.ok() && r->has_value());
  }
  const Stats s = reader.GetStats();
  EXPECT_EQ(s.hedges_issued, 10u);
  EXPECT_LE(s.hedges_issued, s.physical_reads / 10);
}

// Thousands of reads of a simulated store with a straggler tail, hedged
// after 1 ms: every range once, with its bytes; the bounds hold.
TEST(HedgeTest, ExactlyOnceUnderManyHedges) {
  auto sim = MakeSimulatedSource(
      "sim://hedge", 64 << 20,
      LatencyModel::Mixture(std::chrono::microseconds(500), 0.3, 0.1, 10));
  ASSERT_TRUE(sim.ok());
  Options o;
  o.limiter.io_concurrency = 16;
  o.reader.hedge = ReaderOptions::Hedge::kFixed;
  o.reader.hedge_after = std::chrono::microseconds(1000);
  o.reader.hedge_budget = 0.2;
  o.reader.planner = PlannerOptions::None();
  auto reader = Reader::Open(*sim, o);
  ASSERT_TRUE(reader.ok());
  std::vector<ByteRange> ranges;
  for (uint64_t i = 0; i < 2000; ++i) ranges.push_back({i * 8192, 4096});
  auto stream = reader->ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok());
  std::vector<int> seen(ranges.size(), 0);
  for (;;) {
    auto r = stream->Next();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    if (!r->has_value()) break;
    ++seen[(*r)->index];
    const ByteRange& range = ranges[(*r)->index];
    ASSERT_EQ((*r)->bytes.size(), range.length);
    ASSERT_EQ((*r)->bytes.span()[7], SimulatedByteAt(range.offset + 7));
  }
  for (int n : seen) ASSERT_EQ(n, 1);
  const Stats s = reader->GetStats();
  EXPECT_GT(s.hedges_issued, 0u);
  EXPECT_LE(static_cast<double>(s.hedges_issued), 0.2 * 2000);
  EXPECT_LE(s.hedges_won, s.hedges_issued);
  const Stats l = reader->limiter()->GetStats();
  EXPECT_LE(l.peak_in_flight,
            o.limiter.io_concurrency + o.ResolvedLimiter().hedge_reserve);
  EXPECT_LE(l.peak_retained_count, o.limiter.EffectiveResponseBudgetCount() +
                                       o.ResolvedLimiter().hedge_reserve);
}

// Takes every result of `stream` (in any order) and checks its bytes.
void DrainPattern(RangeStream& stream, const std::vector<ByteRange>& ranges) {
  const testing::DrainResult d = testing::Drain(stream, ranges);
  EXPECT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_EQ(d.bad_bytes, 0u);
  EXPECT_EQ(d.indexes.size(), ranges.size());
}

// Issue 9: a read whose hedge the budget forbids waits for reads issued to
// make room, not for a timer. With every read held and the budget spent,
// the hedge timer is given nothing more to look at, however many reads
// wait and however long: before, each batch of reads was looked at again
// every RetryDelay() (1.25 ms here) for as long as it was out.
TEST(HedgeTest, SpentBudgetArmsNothingWhileReadsWait) {
  for (uint32_t n : {100u, 1000u}) {
    SCOPED_TRACE("reads " + std::to_string(n));
    auto gate = GatedSource::Make("gate", 1 << 20);
    Options lo;
    lo.limiter.io_concurrency = n;
    lo.reader.hedge_budget = 1.0;  // a reserve of n: only the budget binds
    auto limiter = Limiter::Make(lo);
    ASSERT_TRUE(limiter.ok());
    Reader reader = HedgingReader(gate, n, 0.02, *limiter, milliseconds(5));
    std::vector<ByteRange> ranges;
    for (uint64_t i = 0; i < n; ++i) ranges.push_back({i * 100, 100});
    auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
    ASSERT_TRUE(stream.ok());
    const uint32_t allowed = n / 50;  // hedge-budget 0.02
    ASSERT_TRUE(gate->WaitForHeld(n + allowed)) << gate->held();
    const std::shared_ptr<detail::HedgePolicy> policy =
        detail::HedgePolicyOf(reader);
    ASSERT_NE(policy, nullptr);
    const uint64_t before = policy->rechecks();
    // Ten times the hedge delay with the budget spent.
    std::this_thread::sleep_for(milliseconds(50));
    EXPECT_EQ(gate->held(), n + allowed);  // not one hedge more
    EXPECT_EQ(policy->rechecks() - before, 0u) << policy->Describe();
    // Looked at again only when reads issued made room for a hedge.
    EXPECT_LE(policy->rechecks(), allowed) << policy->Describe();
    gate->ReleaseAll();
    DrainPattern(*stream, ranges);
    EXPECT_EQ(reader.GetStats().hedges_issued, allowed);
    ASSERT_TRUE(gate->WaitForOutstanding(0));
    ExpectLimiterDrained(reader);
  }
}

// hedge-budget=0: no read is ever put on the hedge timer.
TEST(HedgeTest, ZeroBudgetArmsNothing) {
  auto gate = GatedSource::Make("gate", 1 << 20);
  Reader reader = HedgingReader(gate, 64, 0.0);
  std::vector<ByteRange> ranges;
  for (uint64_t i = 0; i < 64; ++i) ranges.push_back({i * 100, 100});
  auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(gate->WaitForHeld(64));
  std::this_thread::sleep_for(milliseconds(20));  // 20 hedge delays
  const std::shared_ptr<detail::HedgePolicy> policy =
      detail::HedgePolicyOf(reader);
  ASSERT_NE(policy, nullptr);
  EXPECT_EQ(policy->checks(), 0u) << policy->Describe();
  EXPECT_EQ(policy->rechecks(), 0u) << policy->Describe();
  EXPECT_EQ(gate->held(), 64u);
  gate->ReleaseAll();
  DrainPattern(*stream, ranges);
  ExpectLimiterDrained(reader);
}

// A read parked for want of budget is hedged once reads issued later (by
// another stream of the reader) make room.
TEST(HedgeTest, WaitingReadIsHedgedWhenNewReadsMakeRoom) {
  auto gate = GatedSource::Make("gate", 1 << 20);
  Reader reader = HedgingReader(gate, 8, 0.5);
  const std::vector<ByteRange> first = {{0, 100}, {100, 100}};
  auto a = reader.ReadRanges(first, Delivery::kAsCompleted);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(gate->WaitForHeld(3));  // 2 reads, 1 hedge: the budget's all
  const std::vector<ByteRange> second = {{200, 100}, {300, 100}};
  auto b = reader.ReadRanges(second, Delivery::kAsCompleted);
  ASSERT_TRUE(b.ok());
  // 4 reads allow 2 hedges: the waiting read of `a` gets one, and `b`'s
  // reads none (the budget is spent again).
  ASSERT_TRUE(gate->WaitForHeld(6)) << gate->held();
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(gate->held(), 6u);
  std::multiset<uint64_t> offsets;
  for (const ByteRange& r : gate->held_ranges()) offsets.insert(r.offset);
  EXPECT_EQ(offsets.count(0), 2u);
  EXPECT_EQ(offsets.count(100), 2u);
  gate->ReleaseAll();
  DrainPattern(*a, first);
  DrainPattern(*b, second);
  EXPECT_EQ(reader.GetStats().hedges_issued, 2u);
  ASSERT_TRUE(gate->WaitForOutstanding(0));
  ExpectLimiterDrained(reader);
}

// Issue 8: a BlockCache reads each block once for every concurrent miss,
// so a second copy of a late read would join the first one's block read
// and could never win (20 hedges issued, 0 won). Reads of such a source
// are not hedged: no timer, no budget, no reserve.
TEST(HedgeTest, NotHedgedThroughABlockCache) {
  auto gate = GatedSource::Make("gate", 1 << 20);
  auto cache = BlockCache::Make();
  ASSERT_TRUE(cache.ok());
  auto cached = MakeCachedSource(gate, *cache);
  ASSERT_TRUE(cached.ok());
  EXPECT_FALSE(gate->Info().joins_concurrent_reads);
  const SourceInfo info = (*cached)->Info();
  EXPECT_TRUE(info.joins_concurrent_reads);
  EXPECT_NE(info.description.find("not hedged"), std::string::npos)
      << info.description;
  // A decorator over the cache says so too.
  EXPECT_TRUE(SourceWrapper(*cached).Info().joins_concurrent_reads);
  Reader reader = HedgingReader(*cached);
  const std::vector<ByteRange> ranges = {{4096, 1000}};
  auto stream = reader.ReadRanges(ranges);
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(gate->WaitForHeld(1));              // the block read
  std::this_thread::sleep_for(milliseconds(20));  // 20 hedge delays
  const std::shared_ptr<detail::HedgePolicy> policy =
      detail::HedgePolicyOf(reader);
  EXPECT_EQ(policy ? policy->checks() : 0, 0u)
      << (policy ? policy->Describe() : "");
  EXPECT_EQ(reader.limiter()->GetStats().hedges_issued, 0u);
  gate->ReleaseAll();
  DrainPattern(*stream, ranges);
  EXPECT_EQ(reader.GetStats().hedges_issued, 0u);
  EXPECT_EQ(gate->reads_started(), 1u);
  ExpectLimiterDrained(reader);
}

TEST(HedgeTest, SimulatedStoreCancelDropsTheTimer) {
  auto sim = MakeSimulatedSource("sim://slow", 1 << 20,
                                 LatencyModel::Fixed(std::chrono::seconds(30)));
  ASSERT_TRUE(sim.ok());
  testing::CollectingSink sink;
  (*sim)->Read({0, 10}, &sink, 7);
  (*sim)->Cancel(&sink, 8);  // unknown: ignored
  EXPECT_EQ(sink.count(), 0u);
  (*sim)->Cancel(&sink, 7);
  ASSERT_TRUE(sink.WaitFor(1, milliseconds(1000)));
  EXPECT_EQ(sink.Get(7).bytes.status().code(), StatusCode::kCancelled);
  (*sim)->Cancel(&sink, 7);  // done already: ignored
  EXPECT_EQ(sink.duplicates(), 0u);
}

}  // namespace
}  // namespace rangeio
