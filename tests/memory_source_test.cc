// The in-memory Source: inline completion, zero-copy and copying modes.
#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "rangeio/memory_source.h"
#include "rangeio/source.h"
#include "support/collecting_sink.h"
#include "support/gated_source.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

using testing::CollectingSink;

TEST(MemorySourceTest, NameAndSize) {
  auto s = MakeMemorySource("blob-7", testing::PatternBuffer(1234));
  EXPECT_EQ(s->name(), "blob-7");
  auto size = s->Size();
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, 1234u);
}

TEST(MemorySourceTest, ZeroCopyCompletesInlineWithViewsOfTheBuffer) {
  Slice buffer = testing::PatternBuffer(4096);
  auto s = MakeMemorySource("mem", buffer, /*zero_copy=*/true);
  CollectingSink sink;
  s->Read({100, 200}, &sink, 7);
  ASSERT_TRUE(sink.Has(7)) << "memory reads complete before Read returns";
  auto done = sink.Get(7);
  EXPECT_EQ(done.thread, std::this_thread::get_id());
  ASSERT_TRUE(done.bytes.ok());
  EXPECT_EQ(done.bytes->data(), buffer.data() + 100) << "not zero-copy";
  EXPECT_TRUE(testing::MatchesPattern({100, 200}, done.bytes->span()));
  EXPECT_EQ(sink.duplicates(), 0u);
}

TEST(MemorySourceTest, CopyingModeReturnsOwnBuffers) {
  Slice buffer = testing::PatternBuffer(4096);
  auto s = MakeMemorySource("mem", buffer, /*zero_copy=*/false);
  CollectingSink sink;
  s->Read({4000, 96}, &sink, 1);
  ASSERT_TRUE(sink.WaitFor(1));
  auto done = sink.Get(1);
  ASSERT_TRUE(done.bytes.ok());
  const std::byte* p = done.bytes->data();
  EXPECT_FALSE(p >= buffer.data() && p < buffer.data() + buffer.size())
      << "copying mode returned a view of the source buffer";
  EXPECT_TRUE(testing::MatchesPattern({4000, 96}, done.bytes->span()));
}

TEST(MemorySourceTest, ZeroLengthAndLastByte) {
  auto s = MakeMemorySource("mem", testing::PatternBuffer(10));
  CollectingSink sink;
  s->Read({10, 0}, &sink, 1);
  s->Read({9, 1}, &sink, 2);
  s->Read({0, 10}, &sink, 3);
  ASSERT_TRUE(sink.WaitFor(3));
  auto empty = sink.Get(1);
  ASSERT_TRUE(empty.bytes.ok());
  EXPECT_TRUE(empty.bytes->empty());
  EXPECT_TRUE(testing::MatchesPattern({9, 1}, sink.Get(2).bytes->span()));
  EXPECT_TRUE(testing::MatchesPattern({0, 10}, sink.Get(3).bytes->span()));
}

TEST(MemorySourceTest, SlicesOutliveTheSource) {
  Slice result;
  {
    auto s = MakeMemorySource("mem", testing::PatternBuffer(512));
    CollectingSink sink;
    s->Read({256, 256}, &sink, 1);
    ASSERT_TRUE(sink.WaitFor(1));
    result = *sink.Get(1).bytes;
  }
  // Source and original buffer handle are gone; the slice keeps the bytes.
  EXPECT_TRUE(testing::MatchesPattern({256, 256}, result.span()));
}

TEST(MemorySourceTest, ConcurrentReadsFromManyThreads) {
  auto s = MakeMemorySource("mem", testing::PatternBuffer(1 << 16));
  CollectingSink sink;
  std::vector<std::thread> threads;
  for (uint64_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < 250; ++i) {
        uint64_t tag = t * 1000 + i;
        s->Read({(tag * 61) % 60000, 64}, &sink, tag);
      }
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_TRUE(sink.WaitFor(1000));
  EXPECT_EQ(sink.duplicates(), 0u);
  for (uint64_t t = 0; t < 4; ++t) {
    for (uint64_t i = 0; i < 250; ++i) {
      uint64_t tag = t * 1000 + i;
      auto d = sink.Get(tag);
      ASSERT_TRUE(d.bytes.ok());
      EXPECT_TRUE(
          testing::MatchesPattern({(tag * 61) % 60000, 64}, d.bytes->span()));
    }
  }
}

}  // namespace
}  // namespace rangeio
