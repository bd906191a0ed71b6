// The options of one ReadRanges call (rangeio/range_stream.h) and the
// one-call forms (Reader::ReadAll, ReadInto, Read): push delivery, per-range
// errors, caller-set issue order, a per-call planner, and the one range
// check. The invariants (peak in-flight, peak retained, every permit back)
// are checked for each.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "rangeio/rangeio.h"
#include "support/gated_source.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

using std::chrono::milliseconds;
using testing::ExpectEachIndexOnce;
using testing::ExpectLimiterDrains;
using testing::GatedSource;
using ::testing::HasSubstr;
using testing::LimitOptions;
using testing::MatchesPattern;
using testing::MiB;
using testing::OpenReader;
using testing::SpreadRanges;

// What a pushed stream handed to its callbacks: each result's index is
// kept and its bytes checked against `ranges` (then released, as a consumer
// that keeps up does).
class Pushed {
 public:
  explicit Pushed(std::vector<ByteRange> ranges = {})
      : ranges_(std::move(ranges)) {}

  ReadOptions Options(Delivery delivery = Delivery::kAsCompleted) {
    ReadOptions o;
    o.delivery = delivery;
    o.on_result = [this](RangeResult r) {
      std::lock_guard<std::mutex> lock(mu_);
      EXPECT_FALSE(ended_) << "a result after the end";
      EXPECT_FALSE(inside_) << "two callbacks at once";
      inside_ = true;
      indexes_.push_back(r.index);
      if (!r.status.ok() ||
          (!ranges_.empty() &&
           !MatchesPattern(ranges_[r.index], r.bytes.span()))) {
        ++bad_;
      }
      inside_ = false;
      cv_.notify_all();
    };
    o.on_end = [this](Status st) {
      std::lock_guard<std::mutex> lock(mu_);
      EXPECT_FALSE(ended_) << "two ends";
      ended_ = true;
      end_ = std::move(st);
      cv_.notify_all();
    };
    return o;
  }
  bool WaitForEnd() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, testing::kHangGuard, [&] { return ended_; });
  }
  std::vector<size_t> indexes() {
    std::lock_guard<std::mutex> lock(mu_);
    return indexes_;
  }
  size_t bad() {
    std::lock_guard<std::mutex> lock(mu_);
    return bad_;
  }
  Status end() {
    std::lock_guard<std::mutex> lock(mu_);
    return end_;
  }
  bool ended() {
    std::lock_guard<std::mutex> lock(mu_);
    return ended_;
  }

 private:
  const std::vector<ByteRange> ranges_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<size_t> indexes_;
  size_t bad_ = 0;
  bool ended_ = false;
  bool inside_ = false;
  Status end_;
};

TEST(ReadAllTest, EveryRangeInRequestOrderCoalescedOrNot) {
  const uint64_t kSize = 1 << 20;
  for (bool coalesce : {false, true}) {
    SCOPED_TRACE(coalesce);
    auto gate = GatedSource::Make("g", kSize, GatedSource::Mode::kPassAsync);
    Options o = LimitOptions(4);
    if (coalesce) o.reader.planner = PlannerOptions::ObjectStore();
    Reader reader = OpenReader(gate, o);
    const std::vector<ByteRange> ranges = {
        {5000, 10}, {0, 100}, {90, 20}, {700000, 3}, {7, 0}};
    auto all = reader.ReadAll(ranges);
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    ASSERT_EQ(all->size(), ranges.size());
    for (size_t i = 0; i < ranges.size(); ++i) {
      EXPECT_TRUE(MatchesPattern(ranges[i], (*all)[i].span())) << i;
    }
    // Unplanned, each range one read (the empty one too); planned, the two
    // overlapping ranges share one and the empty one needs none.
    EXPECT_EQ(gate->reads_started(), coalesce ? 3u : 5u);
    all->clear();
    ExpectLimiterDrains(*reader.limiter());
  }
}

// The results are all held until the last arrives: a request whose reads
// cannot fit in the response budget at once is refused before any I/O,
// naming the way out; one read larger than the byte budget is admitted
// alone and fits.
TEST(ReadAllTest, RefusesWhatTheBudgetCannotHoldAtOnce) {
  auto gate = GatedSource::Make("g", 1 << 20, GatedSource::Mode::kPassInline);
  Reader reader = OpenReader(gate, LimitOptions(2, 4, 1000));
  const auto five = SpreadRanges(5, 10, 1000);
  auto count = reader.ReadAll(five);
  ASSERT_FALSE(count.ok());
  EXPECT_EQ(count.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(count.status().message(), HasSubstr("ReadInto"));
  const std::vector<ByteRange> bytes = {{0, 600}, {2000, 600}};
  EXPECT_EQ(reader.ReadAll(bytes).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(gate->reads_started(), 0u);
  auto big = reader.Read({0, 5000});
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_TRUE(MatchesPattern({0, 5000}, big->span()));
  big->Reset();  // it held the whole budget
  // The same five ranges fit through ReadInto, released one by one.
  std::vector<std::vector<std::byte>> buffers(five.size(),
                                              std::vector<std::byte>(10));
  std::vector<std::span<std::byte>> spans(buffers.begin(), buffers.end());
  ASSERT_TRUE(reader.ReadInto(five, spans).ok());
  for (size_t i = 0; i < five.size(); ++i) {
    EXPECT_TRUE(MatchesPattern(five[i], buffers[i])) << i;
  }
}

TEST(ReadIntoTest, ChecksBuffersBeforeAnyIoAndFillsThem) {
  auto gate = GatedSource::Make("g", 1 << 20, GatedSource::Mode::kPassAsync);
  Reader reader = OpenReader(gate, LimitOptions(3, 2));
  const auto ranges = SpreadRanges(50, 64, 4096);
  std::vector<std::byte> flat(ranges.size() * 64);
  std::vector<std::span<std::byte>> spans;
  for (size_t i = 0; i < ranges.size(); ++i) {
    spans.emplace_back(flat.data() + i * 64, 64);
  }
  std::vector<std::span<std::byte>> short_one = spans;
  short_one[7] = short_one[7].first(63);
  const Status bad = reader.ReadInto(ranges, short_one);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("buffer 7 holds 63 bytes"));
  EXPECT_EQ(reader.ReadInto(ranges, std::span(spans).first(3)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(gate->reads_started(), 0u);
  // 50 ranges through a budget of 2 responses.
  ASSERT_TRUE(reader.ReadInto(ranges, spans).ok());
  for (size_t i = 0; i < ranges.size(); ++i) {
    EXPECT_TRUE(MatchesPattern(ranges[i], spans[i])) << i;
  }
  EXPECT_LE(reader.limiter()->GetStats().peak_retained_count, 2u);
  ExpectLimiterDrains(*reader.limiter());
}

// One range check, one message format, for every caller.
TEST(CheckRangesTest, OneFormat) {
  const std::vector<ByteRange> ranges = {{0, 10}, {95, 10}};
  const Status past = CheckRanges(ranges, 100, "obj");
  EXPECT_EQ(past.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(past.message(),
            "range 1 [95, 105) of 'obj': ends past its size 100");
  const Status overflow = CheckRange({UINT64_MAX, 2}, 100, "obj");
  EXPECT_EQ(overflow.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(overflow.message(),
              HasSubstr("range (offset 18446744073709551615, length 2) of "
                        "'obj': offset + length overflows 64 bits"));
  EXPECT_TRUE(CheckRanges(ranges, 105, "obj").ok());
}

TEST(PushTest, EveryResultOnceThenTheEndWithinTheBounds) {
  for (Delivery delivery : {Delivery::kOrdered, Delivery::kAsCompleted}) {
    constexpr uint32_t kC = 4;
    auto gate = GatedSource::Make("g", 1ull << 36);
    Reader reader = OpenReader(gate, LimitOptions(kC));
    const auto ranges = SpreadRanges(40, 100);
    Pushed pushed(ranges);
    auto stream = reader.ReadRanges(ranges, pushed.Options(delivery));
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    EXPECT_EQ(stream->Next().status().code(), StatusCode::kInvalidArgument);
    ASSERT_TRUE(gate->WaitForHeld(kC));
    while (!pushed.ended()) {
      if (gate->ReleaseNewest()) continue;
      std::this_thread::sleep_for(milliseconds(1));
    }
    ASSERT_TRUE(pushed.WaitForEnd());
    EXPECT_TRUE(pushed.end().ok()) << pushed.end().ToString();
    ExpectEachIndexOnce(pushed.indexes(), ranges.size());
    if (delivery == Delivery::kOrdered) {
      EXPECT_EQ(pushed.indexes(), testing::Iota(ranges.size()));
    }
    EXPECT_EQ(pushed.bad(), 0u);
    const Stats s = reader.limiter()->GetStats();
    EXPECT_EQ(s.peak_in_flight, kC);
    EXPECT_LE(s.peak_retained_count, 2 * kC);
    ExpectLimiterDrains(*reader.limiter());
  }
}

// A pushed stream holds its source, limiter and plan only until it ends and
// is dropped, with or without a planner (no reference cycle through its
// listener).
TEST(PushTest, ADroppedStreamFreesWhatItHeld) {
  for (bool planned : {false, true}) {
    SCOPED_TRACE(planned ? "coalescing planner" : "no planner");
    auto gate = GatedSource::Make("g", 1 << 20, GatedSource::Mode::kPassAsync);
    const std::weak_ptr<Source> source = gate;
    std::weak_ptr<Limiter> limiter;
    {
      Reader reader = OpenReader(std::move(gate), LimitOptions(4));
      limiter = reader.limiter();
      const std::vector<ByteRange> ranges = {{3000, 160}, {1000, 160}};
      Pushed pushed(ranges);
      ReadOptions o = pushed.Options(Delivery::kAsCompleted);
      o.issue_order = IssueOrder::kRequest;
      o.planner =
          planned ? PlannerOptions::ObjectStore() : PlannerOptions::None();
      auto stream = reader.ReadRanges(ranges, o);
      ASSERT_TRUE(stream.ok()) << stream.status().ToString();
      ASSERT_TRUE(pushed.WaitForEnd());
      EXPECT_TRUE(pushed.end().ok()) << pushed.end().ToString();
    }
    // The backend's thread may still be returning from on_end: wait for it
    // (a cycle would keep both forever).
    for (int i = 0; i < 10'000 && !(source.expired() && limiter.expired());
         ++i) {
      std::this_thread::sleep_for(milliseconds(1));
    }
    EXPECT_TRUE(source.expired());
    EXPECT_TRUE(limiter.expired());
  }
}

// A source that completes inline: the callbacks run on the caller's thread,
// before ReadRanges returns.
TEST(PushTest, InlineReadsArriveBeforeReadRangesReturns) {
  auto mem = MakeMemorySource("mem", testing::PatternBuffer(1 << 16));
  Reader reader = OpenReader(mem, LimitOptions(4));
  const auto ranges = SpreadRanges(100, 16, 256);
  Pushed pushed(ranges);
  auto stream = reader.ReadRanges(ranges, pushed.Options(Delivery::kOrdered));
  ASSERT_TRUE(stream.ok());
  EXPECT_TRUE(pushed.ended());
  EXPECT_TRUE(pushed.end().ok());
  EXPECT_EQ(pushed.indexes(), testing::Iota(ranges.size()));
  EXPECT_EQ(pushed.bad(), 0u);
}

// Cancel from a callback stops delivery at once; Cancel from another thread
// waits for a callback running there; either way every permit comes back.
TEST(PushTest, CancelFromACallbackOrAnotherThread) {
  auto gate = GatedSource::Make("g", 1ull << 36);
  Reader reader = OpenReader(gate, LimitOptions(4));
  const auto ranges = SpreadRanges(20, 100);
  std::optional<RangeStream> stream;
  std::atomic<int> calls{0};
  std::atomic<bool> ended{false};
  ReadOptions o;
  o.delivery = Delivery::kAsCompleted;
  o.on_result = [&](RangeResult) {
    if (++calls == 2) stream->Cancel();
  };
  o.on_end = [&](Status) { ended = true; };
  auto started = reader.ReadRanges(ranges, o);
  ASSERT_TRUE(started.ok());
  stream.emplace(std::move(*started));
  ASSERT_TRUE(gate->WaitForHeld(4));
  gate->ReleaseOldest(3);
  testing::GiveThreadsAChance();
  EXPECT_EQ(calls.load(), 2);
  EXPECT_FALSE(ended.load()) << "on_end after Cancel";
  EXPECT_EQ(gate->held(), 0u);  // the rest were cancelled in the backend
  ExpectLimiterDrains(*reader.limiter());

  // A callback blocked on another thread: Cancel waits for it to return.
  auto gate2 = GatedSource::Make("g2", 1ull << 36);
  Reader reader2 = OpenReader(gate2, LimitOptions(4));
  std::atomic<bool> inside{false};
  std::atomic<bool> release{false};
  std::atomic<int> after{0};
  std::atomic<bool> cancelled{false};
  ReadOptions slow;
  slow.delivery = Delivery::kAsCompleted;
  slow.on_result = [&](RangeResult) {
    if (cancelled) ++after;
    inside = true;
    while (!release) std::this_thread::yield();
  };
  auto s2 = reader2.ReadRanges(ranges, slow);
  ASSERT_TRUE(s2.ok());
  ASSERT_TRUE(gate2->WaitForHeld(4));
  testing::ScopedThread releaser([&] { gate2->ReleaseOldest(1); });
  ASSERT_TRUE(testing::WaitUntil([&] { return inside.load(); }));
  testing::ScopedThread unblock([&] {
    std::this_thread::sleep_for(milliseconds(50));
    release = true;
  });
  s2->Cancel();  // returns only once the callback has
  cancelled = true;
  EXPECT_TRUE(release.load());
  gate2->ReleaseAll();
  testing::GiveThreadsAChance();
  EXPECT_EQ(after.load(), 0) << "a callback after Cancel returned";
  ExpectLimiterDrains(*reader2.limiter());
}

// A pushed stream that cannot be admitted while the caller holds every
// result ends with the stall error, found by the deadline timer (no thread
// waits in Next()).
TEST(PushTest, AStallEndsThePushedStreamOnTime) {
  auto gate = GatedSource::Make("g", 1 << 20, GatedSource::Mode::kPassAsync);
  Options o = LimitOptions(2, 2);
  o.reader.response_stall_timeout = milliseconds(100);
  Reader reader = OpenReader(gate, o);
  auto held = reader.ReadAll(SpreadRanges(2, 10, 100));  // the whole budget
  ASSERT_TRUE(held.ok());
  Pushed pushed;
  auto stream = reader.ReadRanges(SpreadRanges(3, 10, 100), pushed.Options());
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(pushed.WaitForEnd());
  EXPECT_EQ(pushed.end().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(pushed.indexes().empty());
  held->clear();
  ExpectLimiterDrains(*reader.limiter());
}

TEST(PushTest, OnEndWithoutOnResultIsRefused) {
  auto gate = GatedSource::Make("g", 100, GatedSource::Mode::kPassInline);
  Reader reader = OpenReader(gate);
  ReadOptions o;
  o.on_end = [](Status) {};
  const ByteRange r{0, 10};
  auto stream = reader.ReadRanges({&r, 1}, o);
  EXPECT_EQ(stream.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(gate->reads_started(), 0u);
}

// Each range its own read: a failed one is delivered with its error and the
// others go on.
TEST(PerRangeErrorsTest, AFailedReadIsItsRangesResult) {
  for (Delivery delivery : {Delivery::kOrdered, Delivery::kAsCompleted}) {
    auto gate =
        GatedSource::Make("obj", 1ull << 36, GatedSource::Mode::kPassAsync);
    const auto ranges = SpreadRanges(10, 100);
    gate->FailOffset(ranges[3].offset, "bad block");
    gate->FailOffset(ranges[8].offset, "bad block");
    Reader reader = OpenReader(gate, LimitOptions(3));
    ReadOptions o;
    o.delivery = delivery;
    o.per_range_errors = true;
    auto stream = reader.ReadRanges(ranges, o);
    ASSERT_TRUE(stream.ok());
    std::vector<size_t> failed;
    size_t n = 0;
    for (;;) {
      auto r = stream->Next();
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      if (!*r) break;
      ++n;
      if ((*r)->status.ok()) {
        EXPECT_TRUE(MatchesPattern(ranges[(*r)->index], (*r)->bytes.span()));
        continue;
      }
      failed.push_back((*r)->index);
      EXPECT_THAT((*r)->status.ToString(), HasSubstr("bad block"));
      EXPECT_THAT((*r)->status.ToString(),
                  HasSubstr(ranges[(*r)->index].ToString()));
      EXPECT_TRUE((*r)->bytes.empty());
    }
    EXPECT_EQ(n, ranges.size());
    std::sort(failed.begin(), failed.end());
    EXPECT_EQ(failed, (std::vector<size_t>{3, 8}));
    EXPECT_EQ(reader.GetStats().ranges_delivered, ranges.size());
    ExpectLimiterDrains(*reader.limiter());
  }
}

// A coalesced read that fails is read again range by range, with priority:
// only the range that really fails gets an error, even in request order
// under a budget the rest of the stream has filled.
TEST(PerRangeErrorsTest, ACoalescedFailureIsRetriedRangeByRange) {
  for (Delivery delivery : {Delivery::kOrdered, Delivery::kAsCompleted}) {
    SCOPED_TRACE(delivery == Delivery::kOrdered ? "ordered" : "as-completed");
    auto gate =
        GatedSource::Make("obj", 1 << 24, GatedSource::Mode::kPassAsync);
    // Runs of three neighbours 1 MiB apart: each run one read.
    std::vector<ByteRange> ranges;
    for (uint64_t run = 0; run < 8; ++run) {
      for (uint64_t k = 0; k < 3; ++k)
        ranges.push_back({run * MiB + k * 100, 50});
    }
    gate->FailOffset(2 * MiB, "bad block");        // run 2's read, and range 6
    gate->FailOffset(5 * MiB + 100, "bad block");  // range 16, alone only
    Options o = LimitOptions(2, 3);
    o.reader.planner = PlannerOptions::ObjectStore();
    Reader reader = OpenReader(gate, o);
    ReadOptions ro;
    ro.delivery = delivery;
    ro.per_range_errors = true;
    auto stream = reader.ReadRanges(ranges, ro);
    ASSERT_TRUE(stream.ok());
    std::vector<size_t> failed;
    std::vector<size_t> seen;
    for (;;) {
      auto r = stream->Next();
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      if (!*r) break;
      seen.push_back((*r)->index);
      if (!(*r)->status.ok()) {
        failed.push_back((*r)->index);
        continue;
      }
      EXPECT_TRUE(MatchesPattern(ranges[(*r)->index], (*r)->bytes.span()));
    }
    ExpectEachIndexOnce(seen, ranges.size());
    std::sort(failed.begin(), failed.end());
    EXPECT_EQ(failed, (std::vector<size_t>{6}));
    EXPECT_EQ(reader.GetStats().ranges_retried, 3u);
    EXPECT_LE(reader.limiter()->GetStats().peak_retained_count, 3u);
    ExpectLimiterDrains(*reader.limiter());
  }
}

// A range split into parts fails with its failed part, and the stream goes
// on; the other parts' budget comes back.
TEST(PerRangeErrorsTest, ASplitRangeFailsWithItsPart) {
  auto gate = GatedSource::Make("obj", 1 << 24, GatedSource::Mode::kPassAsync);
  gate->FailOffset(1000 + 4096, "bad part");
  Options o = LimitOptions(4);
  PlannerOptions p = PlannerOptions::ObjectStore();
  p.split_bytes = 4096;
  p.max_merged_bytes = 4096;
  o.reader.planner = p;
  Reader reader = OpenReader(gate, o);
  const std::vector<ByteRange> ranges = {{1000, 12288}, {1 << 20, 100}};
  ReadOptions ro;
  ro.per_range_errors = true;
  auto stream = reader.ReadRanges(ranges, ro);
  ASSERT_TRUE(stream.ok());
  auto first = stream->Next();
  ASSERT_TRUE(first.ok() && *first);
  EXPECT_EQ((*first)->index, 0u);
  EXPECT_THAT((*first)->status.ToString(), HasSubstr("bad part"));
  auto second = stream->Next();
  ASSERT_TRUE(second.ok() && *second);
  EXPECT_TRUE((*second)->status.ok());
  EXPECT_TRUE(MatchesPattern(ranges[1], (*second)->bytes.span()));
  second->reset();
  EXPECT_FALSE(*stream->Next());
  EXPECT_EQ(reader.GetStats().ranges_retried, 0u);
  ExpectLimiterDrains(*reader.limiter());
}

// kRequest: the planner still coalesces, but the reads go out in the order
// of the first range each serves, not by offset.
TEST(IssueOrderTest, RequestOrderIsTheCallersAndStillCoalesces) {
  auto gate = GatedSource::Make("obj", 1 << 24, GatedSource::Mode::kPassInline);
  Options o = LimitOptions(1);  // one at a time: the issue order is visible
  o.reader.planner = PlannerOptions::ObjectStore();
  Reader reader = OpenReader(gate, o);
  const std::vector<ByteRange> ranges = {
      {3 * MiB, 10}, {0, 10}, {3 * MiB + 20, 10}, {MiB, 10}, {20, 10}};
  for (IssueOrder order : {IssueOrder::kOffset, IssueOrder::kRequest}) {
    gate->ClearStarted();
    ReadOptions ro;
    ro.delivery = Delivery::kAsCompleted;
    ro.issue_order = order;
    auto stream = reader.ReadRanges(ranges, ro);
    ASSERT_TRUE(stream.ok());
    auto out = testing::Drain(*stream, ranges);
    ASSERT_TRUE(out.status.ok()) << out.status.ToString();
    EXPECT_EQ(out.bad_bytes, 0u);
    const std::vector<ByteRange> by_offset = {
        {0, 30}, {MiB, 10}, {3 * MiB, 30}};
    const std::vector<ByteRange> by_request = {
        {3 * MiB, 30}, {0, 30}, {MiB, 10}};
    EXPECT_EQ(gate->started_ranges(),
              order == IssueOrder::kOffset ? by_offset : by_request);
  }
}

// A split range's parts stay together, in file order, when the reads are
// put in request order.
TEST(IssueOrderTest, SplitPartsStayTogether) {
  auto gate = GatedSource::Make("obj", 1 << 24, GatedSource::Mode::kPassInline);
  Options o = LimitOptions(1, 8);  // room for a split range's three parts
  PlannerOptions p = PlannerOptions::ObjectStore();
  p.split_bytes = 4096;
  p.max_merged_bytes = 4096;
  o.reader.planner = p;
  Reader reader = OpenReader(gate, o);
  const std::vector<ByteRange> ranges = {{MiB, 100}, {0, 12288}};
  ReadOptions ro;
  ro.issue_order = IssueOrder::kRequest;
  auto all = reader.ReadRanges(ranges, ro);
  ASSERT_TRUE(all.ok());
  auto out = testing::Drain(*all, ranges);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.bad_bytes, 0u);
  EXPECT_EQ(gate->started_ranges(),
            (std::vector<ByteRange>{
                {MiB, 100}, {0, 4096}, {4096, 4096}, {8192, 4096}}));
}

// A planner given for one call replaces the reader's for that call only.
TEST(IssueOrderTest, APlannerPerCall) {
  auto gate = GatedSource::Make("obj", 1 << 20, GatedSource::Mode::kPassInline);
  Reader reader = OpenReader(gate, LimitOptions(4));  // no planner: none
  const std::vector<ByteRange> ranges = {{0, 10}, {20, 10}};
  ReadOptions ro;
  ro.planner = PlannerOptions::ObjectStore();
  auto s = reader.ReadRanges(ranges, ro);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(testing::Drain(*s, ranges).status.ok());
  EXPECT_EQ(gate->reads_started(), 1u);
  auto t = reader.ReadRanges(ranges);
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(testing::Drain(*t, ranges).status.ok());
  EXPECT_EQ(gate->reads_started(), 3u);
  ro.planner->max_overread_ratio = 0.5;  // invalid: refused before any I/O
  EXPECT_EQ(reader.ReadRanges(ranges, ro).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(gate->reads_started(), 3u);
}

}  // namespace
}  // namespace rangeio
