// BlockCache: hit/miss accounting, hits that take no permit, one read per
// concurrently missed block, the byte budget under concurrent readers, and
// correct bytes after eviction.
#include "rangeio/block_cache.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "rangeio/rangeio.h"
#include "support/gated_source.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

using testing::Drain;
using testing::DrainResult;
using testing::GatedSource;
using testing::PatternByteAt;

constexpr uint64_t kBlock = 4096;

BlockCacheOptions SmallCache(uint64_t blocks) {
  BlockCacheOptions o;
  o.block_bytes = kBlock;
  o.capacity_bytes = blocks * kBlock;
  o.max_cached_read_bytes = std::min<uint64_t>(o.capacity_bytes, 4 * kBlock);
  return o;
}

std::shared_ptr<Source> Cached(std::shared_ptr<Source> inner,
                               std::shared_ptr<BlockCache> cache) {
  auto s = MakeCachedSource(std::move(inner), std::move(cache));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return *s;
}

DrainResult ReadAll(const Reader& reader, const std::vector<ByteRange>& ranges,
                    Delivery d = Delivery::kOrdered) {
  auto stream = reader.ReadRanges(ranges, d);
  EXPECT_TRUE(stream.ok()) << stream.status().ToString();
  return Drain(*stream, ranges, PatternByteAt);
}

TEST(BlockCacheTest, MissThenHitWithItsAccounting) {
  auto cache = *BlockCache::Make(SmallCache(16));
  auto gated = GatedSource::Make("g", 1 << 20, GatedSource::Mode::kPassInline);
  auto reader = *Reader::Open(Cached(gated, cache));
  const std::vector<ByteRange> ranges = {{100, 200}};

  DrainResult first = ReadAll(reader, ranges);
  ASSERT_TRUE(first.status.ok()) << first.status.ToString();
  EXPECT_EQ(first.bad_bytes, 0u);
  // The miss read the whole aligned block.
  EXPECT_EQ(gated->started_ranges(), (std::vector<ByteRange>{{0, kBlock}}));
  BlockCacheStats s = cache->GetStats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 0u);
  EXPECT_EQ(s.block_reads, 1u);
  EXPECT_EQ(s.blocks_cached, 1u);
  EXPECT_EQ(s.bytes_cached, kBlock);

  DrainResult second = ReadAll(reader, {{200, 300}, {0, 4096}});
  ASSERT_TRUE(second.status.ok());
  EXPECT_EQ(second.bad_bytes, 0u);
  EXPECT_EQ(gated->reads_started(), 1u);  // no new backend read
  s = cache->GetStats();
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.reads_saved, 2u);
  // The hits never became physical reads of the reader either.
  const Stats rs = reader.GetStats();
  EXPECT_EQ(rs.physical_reads, 1u);
  EXPECT_EQ(rs.ranges_delivered, 3u);
}

TEST(BlockCacheTest, RangeAcrossBlocksAndShortLastBlock) {
  auto cache = *BlockCache::Make(SmallCache(16));
  const uint64_t size = 3 * kBlock + 100;  // the last block is short
  auto reader = *Reader::Open(Cached(
      GatedSource::Make("g", size, GatedSource::Mode::kPassAsync), cache));
  const std::vector<ByteRange> ranges = {{kBlock - 10, kBlock + 20},
                                         {3 * kBlock, 100},
                                         {2 * kBlock + 5, kBlock + 95}};
  uint64_t hits_after_first = 0;
  for (int round = 0; round < 2; ++round) {  // misses, then hits
    DrainResult d = ReadAll(reader, ranges, Delivery::kAsCompleted);
    ASSERT_TRUE(d.status.ok()) << d.status.ToString();
    EXPECT_EQ(d.bad_bytes, 0u);
    EXPECT_EQ(d.indexes.size(), ranges.size());
    // (The first round's reads run concurrently: one may find a block
    // another just filled, so its hit count depends on timing.)
    if (round == 0) hits_after_first = cache->GetStats().hits;
  }
  EXPECT_EQ(cache->GetStats().hits, hits_after_first + 3);
  EXPECT_EQ(cache->GetStats().bytes_cached, size);
}

TEST(BlockCacheTest, HitsTakeNoPermitAndPassSlowReads) {
  auto cache = *BlockCache::Make(SmallCache(16));
  auto gated = GatedSource::Make("g", 1 << 20, GatedSource::Mode::kPassInline);
  auto source = Cached(gated, cache);
  auto reader = *Reader::Open(source, testing::LimitOptions(1));
  ASSERT_TRUE(ReadAll(reader, {{0, 100}}).status.ok());
  ASSERT_EQ(cache->GetStats().blocks_cached, 1u);  // block 0

  gated->SetMode(GatedSource::Mode::kHold);
  const std::vector<ByteRange> slow_range = {{10 * kBlock, 10}};
  auto slow = reader.ReadRanges(slow_range);  // takes the one permit
  ASSERT_TRUE(slow.ok());
  ASSERT_TRUE(gated->WaitForHeld(1));
  EXPECT_EQ(reader.limiter()->GetStats().in_flight, 1u);

  // A hit completes while the only permit is held by the slow read.
  const std::vector<ByteRange> hit_range = {{5, 500}};
  auto hit_stream = reader.ReadRanges(hit_range);
  ASSERT_TRUE(hit_stream.ok());
  testing::StreamConsumer hit(std::move(*hit_stream), hit_range);
  EXPECT_TRUE(hit.WaitForDone());
  EXPECT_TRUE(hit.final_status().ok()) << hit.final_status().ToString();
  EXPECT_EQ(hit.count(), 1u);
  EXPECT_EQ(hit.bad_bytes(), 0u);
  EXPECT_EQ(reader.limiter()->GetStats().peak_in_flight, 1u);
  EXPECT_EQ(gated->held(), 1u);  // the slow read is still waiting

  gated->ReleaseAll();
  DrainResult rest = Drain(*slow, slow_range, PatternByteAt);
  EXPECT_TRUE(rest.status.ok());
}

TEST(BlockCacheTest, ConcurrentMissesOnOneBlockCauseOneRead) {
  auto cache = *BlockCache::Make(SmallCache(16));
  auto gated = GatedSource::Make("g", 1 << 20);  // holds reads
  // Two sources of the same object (same identity) and two readers.
  auto a = *Reader::Open(Cached(gated, cache));
  auto b = *Reader::Open(Cached(gated, cache));
  const std::vector<ByteRange> ra = {{kBlock + 1, 100}};
  const std::vector<ByteRange> rb = {{kBlock + 50, 3000}};
  auto sa = a.ReadRanges(ra);
  auto sb = b.ReadRanges(rb);
  ASSERT_TRUE(sa.ok() && sb.ok());
  ASSERT_TRUE(gated->WaitForHeld(1));
  testing::GiveThreadsAChance();
  EXPECT_EQ(gated->reads_started(), 1u);
  gated->ReleaseAll();
  DrainResult da = Drain(*sa, ra, PatternByteAt);
  DrainResult db = Drain(*sb, rb, PatternByteAt);
  ASSERT_TRUE(da.status.ok() && db.status.ok());
  EXPECT_EQ(da.bad_bytes + db.bad_bytes, 0u);
  EXPECT_EQ(gated->reads_started(), 1u);
  const BlockCacheStats s = cache->GetStats();
  EXPECT_EQ(s.block_reads, 1u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.reads_saved, 1u);  // the second miss waited instead of reading
}

TEST(BlockCacheTest, ByteBudgetHoldsUnderConcurrentReaders) {
  constexpr uint64_t kCapacityBlocks = 8;
  auto cache = *BlockCache::Make(SmallCache(kCapacityBlocks));
  auto source = Cached(
      MakeMemorySource("mem", testing::PatternBuffer(64 * kBlock), false),
      cache);
  std::vector<std::thread> threads;
  std::atomic<uint64_t> bad{0};
  std::atomic<uint64_t> over{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Reader reader = *Reader::Open(source);
      std::mt19937_64 rng(t);
      for (int round = 0; round < 50; ++round) {
        std::vector<ByteRange> ranges;
        for (int k = 0; k < 8; ++k) {
          const uint64_t off = rng() % (63 * kBlock);
          ranges.push_back({off, 1 + rng() % (kBlock + 100)});
        }
        DrainResult d = ReadAll(reader, ranges, Delivery::kAsCompleted);
        if (!d.status.ok()) ++bad;
        bad += d.bad_bytes;
        if (cache->GetStats().bytes_cached > kCapacityBlocks * kBlock) ++over;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0u);
  EXPECT_EQ(over.load(), 0u);
  const BlockCacheStats s = cache->GetStats();
  EXPECT_LE(s.bytes_cached, kCapacityBlocks * kBlock);
  EXPECT_GT(s.evictions, 0u);
  EXPECT_GT(s.hits, 0u);
}

TEST(BlockCacheTest, CorrectBytesAfterEviction) {
  auto cache = *BlockCache::Make(SmallCache(2));
  auto gated = GatedSource::Make("g", 1 << 20, GatedSource::Mode::kPassInline);
  auto reader = *Reader::Open(Cached(gated, cache));
  for (uint64_t b : {0, 1, 2, 0, 2}) {
    DrainResult d = ReadAll(reader, {{b * kBlock + 7, 100}});
    ASSERT_TRUE(d.status.ok());
    EXPECT_EQ(d.bad_bytes, 0u) << "block " << b;
  }
  const BlockCacheStats s = cache->GetStats();
  // 0, 1, 2 (evicts 0), 0 again (evicts 1), 2 is still there.
  EXPECT_EQ(s.block_reads, 4u);
  EXPECT_EQ(s.evictions, 2u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.blocks_cached, 2u);
}

TEST(BlockCacheTest, SmallReadsReadJustTheirBytesUnlessReadAheadIsOn) {
  for (bool ahead : {false, true}) {
    BlockCacheOptions o = SmallCache(16);
    o.small_read_ahead = ahead;
    auto cache = *BlockCache::Make(o);
    auto gated =
        GatedSource::Make("g", 1 << 20, GatedSource::Mode::kPassInline);
    auto reader = *Reader::Open(Cached(gated, cache));
    ASSERT_TRUE(ReadAll(reader, {{kBlock + 8, 16}}).status.ok());
    EXPECT_EQ(gated->started_ranges(),
              (std::vector<ByteRange>{ahead ? ByteRange{kBlock, kBlock}
                                            : ByteRange{kBlock + 8, 16}}))
        << "read-ahead " << ahead;
    EXPECT_EQ(cache->GetStats().bypassed, ahead ? 0u : 1u);
    EXPECT_EQ(cache->GetStats().blocks_cached, ahead ? 1u : 0u);
  }
}

TEST(BlockCacheTest, FailedBlockReadFailsItsReadersAndIsRetriedLater) {
  auto cache = *BlockCache::Make(SmallCache(16));
  auto gated = GatedSource::Make("g", 1 << 20, GatedSource::Mode::kPassInline);
  gated->FailOffset(kBlock, "bad sector");
  auto reader = *Reader::Open(Cached(gated, cache));
  DrainResult d = ReadAll(reader, {{kBlock + 10, 100}});
  ASSERT_FALSE(d.status.ok());
  const std::string msg = d.status.ToString();
  EXPECT_NE(msg.find("bad sector"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[4106, 4206)"), std::string::npos) << msg;  // the range
  EXPECT_NE(msg.find("[4096, 8192)"), std::string::npos) << msg;  // the block
  EXPECT_EQ(cache->GetStats().blocks_cached, 0u);
  // The failure is not cached: the next reader reads the block again.
  EXPECT_FALSE(ReadAll(reader, {{kBlock, 200}}).status.ok());
  EXPECT_EQ(gated->reads_started(), 2u);
  EXPECT_EQ(reader.limiter()->GetStats().in_flight, 0u);
  EXPECT_EQ(reader.limiter()->GetStats().retained_count, 0u);
}

TEST(BlockCacheTest, InvalidOptionsNameTheField) {
  const struct {
    BlockCacheOptions o;
    const char* field;
  } cases[] = {
      {[] {
         BlockCacheOptions o;
         o.block_bytes = 1000;
         return o;
       }(),
       "block_bytes"},
      {[] {
         BlockCacheOptions o;
         o.block_bytes = 256;
         return o;
       }(),
       "block_bytes"},
      {[] {
         BlockCacheOptions o;
         o.capacity_bytes = 100;
         return o;
       }(),
       "capacity_bytes"},
      {[] {
         BlockCacheOptions o;
         o.small_read_bytes = 0;
         return o;
       }(),
       "small_read_bytes"},
      {[] {
         BlockCacheOptions o;
         o.max_cached_read_bytes = 1;
         return o;
       }(),
       "max_cached_read_bytes"},
  };
  for (const auto& c : cases) {
    auto cache = BlockCache::Make(c.o);
    ASSERT_FALSE(cache.ok()) << c.field;
    EXPECT_NE(cache.status().ToString().find(c.field), std::string::npos)
        << cache.status().ToString();
  }
  EXPECT_FALSE(MakeCachedSource(nullptr, *BlockCache::Make()).ok());
}

}  // namespace
}  // namespace rangeio
