// The instrumented source the scheduling tests rely on: if its counting or
// gating were wrong, those tests would prove nothing.
#include "support/gated_source.h"

#include <gtest/gtest.h>

#include "support/collecting_sink.h"

namespace rangeio::testing {
namespace {

TEST(GatedSourceTest, HoldsUntilReleasedAndCountsConcurrency) {
  auto gate = GatedSource::Make("g", 1 << 20);
  CollectingSink sink;
  for (uint64_t i = 0; i < 4; ++i) gate->Read({i * 100, 10}, &sink, 10 + i);
  EXPECT_EQ(sink.count(), 0u);
  EXPECT_EQ(gate->outstanding(), 4u);
  EXPECT_EQ(gate->held(), 4u);
  EXPECT_EQ(gate->peak_outstanding(), 4u);
  EXPECT_EQ(gate->reads_started(), 4u);
  EXPECT_EQ(gate->held_tags(), (std::vector<uint64_t>{10, 11, 12, 13}));

  EXPECT_TRUE(gate->ReleaseTag(12));
  EXPECT_FALSE(gate->ReleaseTag(12));
  EXPECT_TRUE(sink.Has(12));
  EXPECT_TRUE(gate->ReleaseOffset(300));
  EXPECT_TRUE(sink.Has(13));
  EXPECT_TRUE(gate->ReleaseNewest());
  EXPECT_TRUE(sink.Has(11));
  EXPECT_EQ(gate->ReleaseOldest(5), 1u);
  EXPECT_TRUE(sink.Has(10));
  EXPECT_EQ(gate->outstanding(), 0u);
  EXPECT_EQ(gate->peak_outstanding(), 4u);
  EXPECT_EQ(gate->reads_completed(), 4u);
  EXPECT_EQ(gate->bytes_returned(), 40u);
  EXPECT_EQ(sink.order(), (std::vector<uint64_t>{12, 13, 11, 10}));
  EXPECT_EQ(sink.duplicates(), 0u);
  for (uint64_t i = 0; i < 4; ++i) {
    auto d = sink.Get(10 + i);
    ASSERT_TRUE(d.bytes.ok());
    EXPECT_TRUE(MatchesPattern({i * 100, 10}, d.bytes->span()));
  }
}

TEST(GatedSourceTest, FailsChosenOffsetsWithoutNamingTheRange) {
  auto gate = GatedSource::Make("g", 1000, GatedSource::Mode::kPassInline);
  gate->FailOffset(50, "boom");
  CollectingSink sink;
  gate->Read({50, 5}, &sink, 1);
  gate->Read({60, 5}, &sink, 2);
  ASSERT_TRUE(sink.Has(1) && sink.Has(2));
  auto bad = sink.Get(1);
  ASSERT_FALSE(bad.bytes.ok());
  EXPECT_EQ(bad.bytes.status().code(), StatusCode::kIoError);
  EXPECT_EQ(bad.bytes.status().message(), "boom");
  EXPECT_TRUE(sink.Get(2).bytes.ok());
  EXPECT_EQ(gate->reads_failed(), 1u);
  EXPECT_EQ(gate->bytes_returned(), 5u);
}

TEST(GatedSourceTest, PassModesComplete) {
  auto gate = GatedSource::Make("g", 1000);
  CollectingSink sink;
  gate->Read({0, 1}, &sink, 1);
  gate->Read({1, 0}, &sink, 2);
  gate->SetMode(GatedSource::Mode::kPassAsync);
  gate->Read({2, 3}, &sink, 3);
  ASSERT_TRUE(sink.WaitFor(3));
  EXPECT_TRUE(sink.Get(2).bytes->empty());
  EXPECT_TRUE(gate->WaitForOutstanding(0));
  EXPECT_EQ(gate->started_ranges(),
            (std::vector<ByteRange>{{0, 1}, {1, 0}, {2, 3}}));
  gate->FailSize(Status::IoError("gone"));
  EXPECT_EQ(gate->Size().status().code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace rangeio::testing
