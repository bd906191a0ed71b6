// The in-memory Source: inline completion, zero-copy and copying modes
// (what every Source must do: source_conformance_test.cc).
#include "rangeio/memory_source.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "rangeio/source.h"
#include "support/collecting_sink.h"
#include "support/gated_source.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

using testing::CollectingSink;

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

}  // namespace
}  // namespace rangeio
