// What a caller that holds results needs from the limiter (the FAISS
// integration's read-ahead): Priority::kHigh, a stream its caller blocks on
// admitted before streams already waiting, still within the in-flight
// bound; and Limiter::Stalled, which says when only releasing held results
// can admit anything.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <vector>

#include "rangeio/reader.h"
#include "support/gated_source.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

using testing::ExpectLimiterDrains;
using testing::GatedSource;
using testing::LimitOptions;
using testing::OpenReader;
using testing::StreamConsumer;
using testing::WaitUntil;

std::vector<ByteRange> RangesAt(uint64_t base, size_t n) {
  std::vector<ByteRange> r;
  for (size_t i = 0; i < n; ++i) r.push_back({base + i * 4096, 64});
  return r;
}

// With one permit held and two prefetch streams waiting, a one-range read
// of `priority` is queued last; the first permit freed then goes to it or
// to a waiting stream. True if it went to the late read; nullopt
// if a step failed or timed out.
std::optional<bool> LateReadGetsTheNextPermit(Priority priority) {
  auto gate = GatedSource::Make("gate", 1ull << 36);
  Reader reader = OpenReader(gate, LimitOptions(1));
  const auto a = RangesAt(0, 8);
  const auto b = RangesAt(1 << 20, 8);
  const std::vector<ByteRange> late = {{1 << 30, 64}};
  auto sa = reader.ReadRanges(a, Delivery::kAsCompleted);
  if (!sa.ok()) {
    ADD_FAILURE() << sa.status().ToString();
    return std::nullopt;
  }
  StreamConsumer ca(std::move(*sa), a);
  if (!gate->WaitForOutstanding(1)) return std::nullopt;
  auto sb = reader.ReadRanges(b, Delivery::kAsCompleted);
  if (!sb.ok()) {
    ADD_FAILURE() << sb.status().ToString();
    return std::nullopt;
  }
  StreamConsumer cb(std::move(*sb), b);
  auto sl = reader.ReadRanges(late, Delivery::kOrdered, priority);
  if (!sl.ok()) {
    ADD_FAILURE() << sl.status().ToString();
    return std::nullopt;
  }
  StreamConsumer cl(std::move(*sl), late);

  if (!WaitUntil([&] { return gate->held() == 1; })) return std::nullopt;
  gate->ReleaseOldest();
  if (!WaitUntil([&] { return gate->reads_started() == 2; })) {
    return std::nullopt;
  }
  const bool late_second = gate->started_ranges()[1].offset == late[0].offset;
  EXPECT_EQ(gate->peak_outstanding(), 1u);

  while (!(ca.done() && cb.done() && cl.done())) {
    if (!WaitUntil([&] {
          return gate->held() > 0 || (ca.done() && cb.done() && cl.done());
        })) {
      return std::nullopt;
    }
    gate->ReleaseAll();
  }
  EXPECT_TRUE(cl.final_status().ok()) << cl.final_status().ToString();
  EXPECT_TRUE(ca.final_status().ok()) << ca.final_status().ToString();
  EXPECT_TRUE(cb.final_status().ok()) << cb.final_status().ToString();
  ExpectLimiterDrains(*reader.limiter());
  return late_second;
}

TEST(ReaderPriorityTest, HighPriorityReadJumpsWaitingStreams) {
  EXPECT_EQ(LateReadGetsTheNextPermit(Priority::kHigh), true);
}

// Without the priority the same queue serves a waiting prefetch first: the
// test above measures the priority, not the queue order.
TEST(ReaderPriorityTest, NormalReadQueuesBehindWaitingStreams) {
  EXPECT_EQ(LateReadGetsTheNextPermit(Priority::kNormal), false);
}

// Results held by the caller fill the response budget: a new stream waits
// with nothing in flight (stalled) until one is released.
TEST(ReaderPriorityTest, StalledWhileHeldResultsFillTheBudget) {
  auto gate =
      GatedSource::Make("gate", 1ull << 36, GatedSource::Mode::kPassAsync);
  Reader reader = OpenReader(gate, LimitOptions(4, /*budget_count=*/2));
  const auto a = RangesAt(0, 2);
  auto sa = reader.ReadRanges(a, Delivery::kOrdered);
  ASSERT_TRUE(sa.ok()) << sa.status().ToString();
  std::vector<Slice> held;
  for (int i = 0; i < 2; ++i) {
    auto r = sa->Next();
    ASSERT_TRUE(r.ok() && r->has_value());
    held.push_back((*r)->bytes);
  }
  EXPECT_FALSE(reader.limiter()->Stalled());
  const auto b = RangesAt(1 << 20, 1);
  auto sb = reader.ReadRanges(b, Delivery::kOrdered);
  ASSERT_TRUE(sb.ok()) << sb.status().ToString();
  EXPECT_TRUE(reader.limiter()->Stalled());
  held.pop_back();
  auto rb = sb->Next();
  ASSERT_TRUE(rb.ok() && rb->has_value()) << rb.status().ToString();
  EXPECT_FALSE(reader.limiter()->Stalled());
}

}  // namespace
}  // namespace rangeio
