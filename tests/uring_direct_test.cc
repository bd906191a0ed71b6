// io_uring with O_DIRECT beyond what every engine must do: wide reads into
// registered 1 MiB buffers, small reads of two streams through one ring,
// and the registered arena of 4 KiB slots (fall-back, reuse, slots released
// on other threads, slices that outlive the ring).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "rangeio/rangeio.h"
#include "support/gated_source.h"
#include "support/source_conformance.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

using testing::ExpectLimiterDrains;
using ::testing::HasSubstr;
using testing::LimitOptions;
using testing::MatchesPattern;

class UringDirectTest : public ::testing::Test {
 protected:
  // An O_DIRECT file of `size` pattern bytes through io_uring with a queue
  // depth of `threads` in *out; null after GTEST_SKIP (no O_DIRECT on this
  // file system) or a failure.
  void Open(const std::string& name, size_t size, uint32_t threads,
            std::shared_ptr<Source>* out) {
    LocalFileOptions o;
    o.engine = LocalEngine::kUring;
    o.direct = true;
    o.threads = threads;
    auto source = OpenLocalFile(scratch_.WriteFile(name, size), o);
    if (!source.ok() && testing::IsDirectUnsupported(source.status())) {
      GTEST_SKIP() << source.status().ToString();
    }
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    *out = *std::move(source);
  }

  testing::ScratchDir scratch_;
};

// io_uring with O_DIRECT reads wide ranges (64 KiB..1 MiB, what a
// coalescing planner issues) into registered buffers. That slices keep their
// bytes while held, while later reads reuse released buffers, every backend
// must show: source_conformance_test.cc, SlicesKeepTheirBytesWhileHeld.
TEST_F(UringDirectTest, WideDirectReadsThroughIoUringUseRegisteredBuffers) {
  constexpr size_t kSize = 8 << 20;
  std::shared_ptr<Source> source;
  Open("wide.bin", kSize, 4, &source);
  if (!source) return;
  std::mt19937_64 rng(9);
  std::vector<ByteRange> ranges;
  for (int i = 0; i < 40; ++i) {
    const uint64_t len = (64 << 10) + rng() % (1 << 20);
    ranges.push_back({rng() % (kSize - len + 1), len});
  }
  Options options = LimitOptions(4, 128, 128 << 20);
  options.reader.planner = PlannerOptions::None();
  auto reader = Reader::Open(source, options);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto stream = reader->ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  auto out = testing::Drain(*stream, ranges);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.bad_bytes, 0u);
  const std::string d = source->Info().description;
  EXPECT_THAT(d, HasSubstr("registered 1 MiB buffers")) << d;
  EXPECT_EQ(d.find("(0 into registered buffers)"), std::string::npos) << d;
}

// Small direct reads of two streams (two readers, two consumer threads) on
// one io_uring source: their reads go to the ring a grant at a time
// (ReadMany) and come back in runs per stream (OnReadsDone), interleaved in
// one reaped batch. Every range arrives once with its bytes, and each
// limiter stays within its C and gets every permit back.
TEST_F(UringDirectTest, SmallDirectReadsOfTwoStreamsThroughIoUring) {
  constexpr size_t kSize = 4 << 20;
  std::shared_ptr<Source> source;
  Open("small.bin", kSize, 16, &source);
  if (!source) return;
  // Block-aligned 4 KiB ranges, and odd ones (widened to aligned reads).
  std::vector<ByteRange> ranges;
  for (uint64_t i = 0; i < 600; ++i) {
    ranges.push_back(i % 3 == 0 ? ByteRange{(i * 7919 % 1024) * 4096, 4096}
                                : ByteRange{i * 6151 % (kSize - 5000), 4999});
  }
  Options options = LimitOptions(8);
  options.reader.planner = PlannerOptions::None();
  std::vector<std::shared_ptr<Limiter>> limiters;
  std::vector<testing::DrainResult> out(2);
  std::vector<std::thread> consumers;
  for (size_t k = 0; k < 2; ++k) {
    auto reader = Reader::Open(source, options);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    limiters.push_back(reader->limiter());
    consumers.emplace_back([&, k, r = std::move(*reader)]() mutable {
      auto stream = r.ReadRanges(ranges, Delivery::kAsCompleted);
      ASSERT_TRUE(stream.ok()) << stream.status().ToString();
      out[k] = testing::Drain(*stream, ranges);
    });
  }
  for (std::thread& t : consumers) t.join();
  for (size_t k = 0; k < 2; ++k) {
    ASSERT_TRUE(out[k].status.ok()) << out[k].status.ToString();
    EXPECT_EQ(out[k].bad_bytes, 0u);
    std::vector<size_t> got = out[k].indexes;
    std::sort(got.begin(), got.end());
    ASSERT_EQ(got.size(), ranges.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], i);
    EXPECT_LE(limiters[k]->GetStats().peak_in_flight, 8u);
    ExpectLimiterDrains(*limiters[k]);
  }
}

// Small direct reads land in the registered arena of 4 KiB slots (4 per
// unit of queue depth) while it has free ones and in ordinary memory while
// the consumer holds them all; a held slice keeps its bytes while later
// reads reuse the slots that others released.
TEST_F(UringDirectTest, SmallDirectReadsUseTheRegisteredArenaAndFallBack) {
  constexpr size_t kSize = 4 << 20;
  std::shared_ptr<Source> source;
  Open("arena.bin", kSize, 4, &source);  // 16 arena slots
  if (!source) return;
  std::vector<ByteRange> ranges;
  for (uint64_t i = 0; i < 100; ++i)
    ranges.push_back({i * 37 % 1024 * 4096, 4096});
  Options options = LimitOptions(4, 256, 256 * 4096);
  options.reader.planner = PlannerOptions::None();
  auto reader = Reader::Open(source, options);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto held_stream = reader->ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(held_stream.ok()) << held_stream.status().ToString();
  auto held = testing::Drain(*held_stream, ranges, nullptr, true);
  ASSERT_TRUE(held.status.ok()) << held.status.ToString();
  ASSERT_EQ(held.slices.size(), ranges.size());
  // Release every other result, then read again, releasing each at once.
  for (size_t i = 0; i < held.slices.size(); i += 2) held.slices[i].Reset();
  auto again = reader->ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  auto out = testing::Drain(*again, ranges);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.bad_bytes, 0u);
  for (size_t i = 1; i < held.slices.size(); i += 2) {
    const ByteRange& r = ranges[held.indexes[i]];
    EXPECT_TRUE(MatchesPattern(r, held.slices[i].span()))
        << "held result for offset " << r.offset << " changed";
  }
  const std::string d = source->Info().description;
  EXPECT_THAT(d, HasSubstr("and 16 of 4 KiB")) << d;
  EXPECT_EQ(d.find("(0 into registered buffers)"), std::string::npos) << d;
}

// The count in Info().description's "(N into registered buffers)".
uint64_t RegisteredReads(Source& source) {
  const std::string d = source.Info().description;
  const size_t end = d.find(" into registered buffers)");
  const size_t begin = d.rfind('(', end);
  if (end == std::string::npos || begin == std::string::npos) {
    ADD_FAILURE() << "no registered-buffer count in: " << d;
    return 0;
  }
  return std::stoull(d.substr(begin + 1, end - begin - 1));
}

// Arena slots come back whichever threads release them, while the ring
// takes others: slices handed to three threads that release them as the
// reads go on; then, every slice gone, a request that holds all 16 slots at
// once finds each of them free (none lost between threads).
TEST_F(UringDirectTest, ArenaSlotsReleasedOnOtherThreadsAllComeBack) {
  std::shared_ptr<Source> source;
  Open("arena-threads.bin", 4 << 20, 4, &source);  // 16 arena slots
  if (!source) return;
  Options options = LimitOptions(4, 16, 16 * 4096);
  options.reader.planner = PlannerOptions::None();
  auto reader = Reader::Open(source, options);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  std::vector<ByteRange> ranges;
  for (uint64_t i = 0; i < 3000; ++i) {
    ranges.push_back({i * 37 % 1024 * 4096, 4096});
  }
  constexpr size_t kReleasers = 3;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::vector<Slice>> queues(kReleasers);
  bool done = false;
  std::vector<std::thread> releasers;
  for (size_t k = 0; k < kReleasers; ++k) {
    releasers.emplace_back([&, k] {
      std::vector<Slice> mine;
      std::unique_lock<std::mutex> lk(mu);
      for (;;) {
        cv.wait(lk, [&] { return done || !queues[k].empty(); });
        if (queues[k].empty()) return;
        mine.swap(queues[k]);
        lk.unlock();
        mine.clear();  // releases the slots, off the consumer's thread
        lk.lock();
      }
    });
  }
  size_t delivered = 0;
  {
    auto stream = reader->ReadRanges(ranges, Delivery::kAsCompleted);
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    for (;;) {
      auto r = stream->Next();
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      if (!*r) break;
      EXPECT_TRUE(MatchesPattern(ranges[(*r)->index], (*r)->bytes.span()));
      {
        std::lock_guard<std::mutex> lk(mu);
        queues[delivered % kReleasers].push_back(std::move((*r)->bytes));
      }
      cv.notify_all();
      ++delivered;
    }
  }
  {
    std::lock_guard<std::mutex> lk(mu);
    done = true;
  }
  cv.notify_all();
  for (std::thread& t : releasers) t.join();
  EXPECT_EQ(delivered, ranges.size());
  const uint64_t before = RegisteredReads(*source);
  EXPECT_GT(before, 0u);
  const std::vector<ByteRange> all(ranges.begin(), ranges.begin() + 16);
  auto stream = reader->ReadRanges(all, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  auto held = testing::Drain(*stream, all, nullptr, true);
  ASSERT_TRUE(held.status.ok()) << held.status.ToString();
  EXPECT_EQ(held.bad_bytes, 0u);
  EXPECT_EQ(RegisteredReads(*source) - before, all.size())
      << source->Info().description;
}

// Slices of the 4 KiB arena outlive the source, its ring and the reader:
// the arena goes only when the last of them is released (ASan's leak check
// fails the run if it never goes).
TEST_F(UringDirectTest, ArenaSlicesOutliveTheirSource) {
  std::shared_ptr<Source> source;
  Open("outlive.bin", 1 << 20, 2, &source);
  if (!source) return;
  std::vector<ByteRange> ranges;
  for (uint64_t i = 0; i < 6; ++i) ranges.push_back({i * 8192, 4096});
  std::vector<Slice> held;
  {
    Options options = LimitOptions(2, 8, 8 * 4096);
    options.reader.planner = PlannerOptions::None();
    auto reader = Reader::Open(source, options);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    auto stream = reader->ReadRanges(ranges, Delivery::kOrdered);
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    auto out = testing::Drain(*stream, ranges, nullptr, true);
    ASSERT_TRUE(out.status.ok()) << out.status.ToString();
    ASSERT_EQ(out.indexes, (std::vector<size_t>{0, 1, 2, 3, 4, 5}));
    held = std::move(out.slices);
    EXPECT_THAT(source->Info().description,
                HasSubstr("(6 into registered buffers)"));
    source.reset();  // the reader's is the last: the ring ends with it
  }
  ASSERT_EQ(held.size(), ranges.size());
  for (size_t i = 0; i < held.size(); ++i) {
    EXPECT_TRUE(MatchesPattern(ranges[i], held[i].span()))
        << "slice of offset " << ranges[i].offset << " changed";
  }
  for (size_t i = 0; i < held.size(); i += 2) held[i].Reset();
  for (size_t i = 1; i < held.size(); i += 2) {
    EXPECT_TRUE(MatchesPattern(ranges[i], held[i].span()));
  }
}

}  // namespace
}  // namespace rangeio
