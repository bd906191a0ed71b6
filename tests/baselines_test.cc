// The benchmarks' baselines (bench/baselines/), written on the public API:
// the chunk barrier the Paimon fix removed, and the serialized batches of
// Lance's old blob reader. The benchmarks compare the library against them,
// so they must behave as the old systems did.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "baselines/chunk_barrier.h"
#include "baselines/serialized_batches.h"
#include "rangeio/rangeio.h"
#include "support/gated_source.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

using std::chrono::milliseconds;
using testing::ExpectEachIndexOnce;
using testing::GatedSource;
using testing::LimitOptions;
using testing::OpenReader;
using testing::SpreadRanges;
using testing::StreamConsumer;

// The benchmarks' baseline (bench/baselines/chunk_barrier.h, on the public
// API): C reads at a time, the next chunk waits for the slowest read of the
// previous one.
TEST(ChunkBarrierTest, WaitsForTheWholeChunk) {
  constexpr uint32_t kC = 4;
  auto gate = GatedSource::Make("gate", 1ull << 36);
  Reader reader =
      OpenReader(bench::WithChunkBarrier(gate, kC), LimitOptions(kC));
  const auto ranges = SpreadRanges(12, 32);
  auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok());
  StreamConsumer consumer(std::move(*stream), ranges);

  for (uint64_t chunk = 1; chunk <= 3; ++chunk) {
    ASSERT_TRUE(gate->WaitForStarted(chunk * kC));
    ASSERT_TRUE(gate->WaitForOutstanding(kC));
    // Complete all but the oldest read of the chunk (the straggler).
    for (uint32_t i = 0; i + 1 < kC; ++i) ASSERT_TRUE(gate->ReleaseNewest());
    ASSERT_TRUE(consumer.WaitForCount((chunk - 1) * kC + kC - 1));
    testing::GiveThreadsAChance(milliseconds(30));
    EXPECT_EQ(gate->reads_started(), chunk * kC)
        << "chunk " << chunk + 1 << " started before chunk " << chunk
        << " finished";
    EXPECT_EQ(gate->outstanding(), 1u);
    ASSERT_EQ(gate->ReleaseOldest(), 1u);
  }
  ASSERT_TRUE(consumer.WaitForDone());
  EXPECT_TRUE(consumer.final_status().ok());
  ExpectEachIndexOnce(consumer.indexes(), ranges.size());
  EXPECT_EQ(gate->peak_outstanding(), kC);
  EXPECT_EQ(reader.limiter()->GetStats().peak_in_flight, kC);
}

// A caller's blocking read on its own thread.
class Caller {
 public:
  Caller(bench::SerializedBatches& b, size_t source, ByteRange range)
      : thread_([&b, source, range, this] { got_ = b.Read(source, range); }) {}
  // A test that stopped early (a failed ASSERT) lets held reads go.
  ~Caller() {
    if (thread_.joinable()) GatedSource::PassAllLiveGates();
    Join();
  }
  Result<Slice>& got() {
    Join();
    return got_;
  }

 private:
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  Result<Slice> got_ = Status::Internal("not read");
  std::thread thread_;
};

// While a batch reads, the next one (drained at once) waits for all of it,
// whatever sources the two read.
TEST(SerializedBatchesTest, ABatchWaitsForThePreviousOneOnEverySource) {
  auto limiter = *Limiter::Make(LimitOptions(8));
  std::vector<std::shared_ptr<GatedSource>> gates;
  std::vector<Reader> readers;
  for (const char* name : {"a", "b", "c"}) {
    gates.push_back(GatedSource::Make(name, 1 << 20));
    readers.push_back(OpenReader(gates.back(), Options(), limiter));
  }
  bench::SerializedBatches batches(readers);
  std::vector<std::unique_ptr<Caller>> callers;
  for (size_t s = 0; s < 3; ++s) {
    callers.push_back(std::make_unique<Caller>(batches, s, ByteRange{0, 100}));
    ASSERT_TRUE(testing::WaitUntil([&] { return batches.batches() == s + 1; }));
    if (s > 0) {
      testing::GiveThreadsAChance(milliseconds(30));
      EXPECT_EQ(gates[s]->reads_started(), 0u)
          << "batch " << s + 1 << " started before batch " << s << " ended";
      gates[s - 1]->ReleaseAll();
    }
    ASSERT_TRUE(gates[s]->WaitForHeld(1));
  }
  gates[2]->ReleaseAll();
  for (auto& c : callers) {
    ASSERT_TRUE(c->got().ok()) << c->got().status().ToString();
    EXPECT_TRUE(testing::MatchesPattern({0, 100}, c->got()->span()));
  }
  EXPECT_EQ(batches.batches(), 3u);
}

// An error reaches only the caller whose range failed.
TEST(SerializedBatchesTest, AnErrorReachesOnlyItsCaller) {
  auto gate = GatedSource::Make("g", 1 << 20, GatedSource::Mode::kPassAsync);
  gate->FailOffset(10000, "bad block");
  bench::SerializedBatches batches({OpenReader(gate, LimitOptions(8))});
  Caller good(batches, 0, {0, 100});
  Caller bad(batches, 0, {10000, 100});
  EXPECT_TRUE(good.got().ok());
  ASSERT_FALSE(bad.got().ok());
  EXPECT_THAT(bad.got().status().ToString(), ::testing::HasSubstr("bad block"));
}

}  // namespace
}  // namespace rangeio
