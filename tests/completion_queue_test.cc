// CompletionQueue: results of BatchedReader calls and pushed streams taken
// on the consumer's thread; its queued results hold budget until taken, and
// Close() gives it back at once.
#include "rangeio/completion_queue.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <set>
#include <vector>

#include "rangeio/rangeio.h"
#include "support/gated_source.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

using std::chrono::milliseconds;
using testing::GatedSource;
using testing::LimitOptions;
using testing::MatchesPattern;
using testing::OpenReader;

TEST(CompletionQueueTest, GathersBatchedReadsAndStreams) {
  auto gate = GatedSource::Make("g", 1 << 20, GatedSource::Mode::kPassAsync);
  gate->FailOffset(3000, "bad block");
  Reader reader = OpenReader(gate, LimitOptions(4));
  auto batched = *BatchedReader::Open(reader);
  auto queue = CompletionQueue::Make();
  for (uint64_t i = 0; i < 5; ++i) {
    batched->ReadAsync({i * 1000, 10}, queue->Callback(i));
  }
  const std::vector<ByteRange> ranges =
      testing::SpreadRanges(5, 10, 100, 50000);
  ReadOptions ro;
  ro.per_range_errors = true;
  auto stream = reader.ReadRanges(ranges, queue->Options(100, 999, ro));
  ASSERT_TRUE(stream.ok());
  std::set<uint64_t> tags;
  while (tags.size() < 10) {
    auto got = queue->Wait(testing::kHangGuard);
    ASSERT_FALSE(got.empty());
    for (auto& c : got) {
      EXPECT_TRUE(tags.insert(c.tag).second) << "twice: " << c.tag;
      if (c.tag == 3) {
        EXPECT_THAT(c.result.status().ToString(), ::testing::HasSubstr("bad"));
        continue;
      }
      ASSERT_TRUE(c.result.ok())
          << c.tag << ": " << c.result.status().ToString();
      const ByteRange r =
          c.tag < 100 ? ByteRange{c.tag * 1000, 10} : ranges[c.tag - 100];
      EXPECT_TRUE(MatchesPattern(r, c.result->span())) << c.tag;
    }
  }
  EXPECT_TRUE(queue->Wait(milliseconds(20)).empty());  // nothing else comes
  EXPECT_EQ(tags.count(999), 0u);                      // the stream ended OK
}

// Queued results hold budget; Close drops them (and every later one), and
// the budget comes back without anyone taking them.
TEST(CompletionQueueTest, CloseReleasesWhatIsQueued) {
  auto gate = GatedSource::Make("g", 1 << 20, GatedSource::Mode::kPassAsync);
  Reader reader = OpenReader(gate, LimitOptions(2, 4));
  auto queue = CompletionQueue::Make();
  const auto ranges = testing::SpreadRanges(8, 10, 100);
  auto stream = reader.ReadRanges(ranges, queue->Options(0, 99));
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(testing::WaitUntil([&] { return queue->size() == 4; }));
  testing::GiveThreadsAChance();
  EXPECT_EQ(queue->size(), 4u);  // the budget is full: nothing more admitted
  EXPECT_EQ(reader.limiter()->GetStats().retained_count, 4u);
  queue->Close();
  EXPECT_TRUE(queue->closed());
  EXPECT_EQ(queue->size(), 0u);
  EXPECT_TRUE(queue->Wait(testing::kHangGuard).empty());  // no wait once closed
  stream->Cancel();
  testing::ExpectLimiterDrains(*reader.limiter());
}

}  // namespace
}  // namespace rangeio
