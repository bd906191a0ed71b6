// One suite of behaviour tests that every local-file engine passes: the
// pread pool and io_uring, each buffered (with and without the inline
// preadv2 attempt) and with O_DIRECT. Real temp files, read back byte for
// byte: unaligned offsets and lengths, ranges ending at and past the end of
// the file, files truncated or removed while reads are queued, cancellation
// mid-way, errors that name the file and the range, and the Reader's
// invariants (peak in-flight, retained bytes, every permit returned).
//
// Nothing here depends on timing: where a race is the point (a file
// truncated while reads are in flight), every outcome the race allows is
// checked to be a correct one.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "rangeio/rangeio.h"
#include "support/collecting_sink.h"
#include "support/gated_source.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

using testing::CollectingSink;
using ::testing::HasSubstr;
using testing::LimitOptions;
using testing::MatchesPattern;
using ::testing::StartsWith;
using testing::WaitUntil;

struct Engine {
  const char* name;
  LocalEngine engine;
  bool direct;
  bool try_inline;
  // LocalFileOptions::hit_threads; unset: the default.
  std::optional<uint32_t> hit_threads = std::nullopt;
};

const Engine kEngines[] = {
    {"pread", LocalEngine::kPread, false, false},
    {"pread_inline", LocalEngine::kPread, false, true, 0},
    {"pread_hits", LocalEngine::kPread, false, true, 2},
    {"pread_direct", LocalEngine::kPread, true, false},
    {"uring", LocalEngine::kUring, false, false},
    {"uring_inline", LocalEngine::kUring, false, true},
    {"uring_direct", LocalEngine::kUring, true, false},
};

// For test names and failure messages: the engine's name.
void PrintTo(const Engine& e, std::ostream* os) { *os << e.name; }

class LocalConformanceTest : public ::testing::TestWithParam<Engine> {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "rangeio_local_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr) << tmpl;
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const std::string& f : files_) ::unlink(f.c_str());
    ::rmdir(dir_.c_str());
  }

  // A file of `size` pattern bytes (PatternByteAt).
  std::string WriteFile(const std::string& name, size_t size) {
    std::string path = dir_ + "/" + name;
    files_.push_back(path);
    std::vector<std::byte> bytes(size);
    for (size_t i = 0; i < size; ++i) bytes[i] = testing::PatternByteAt(i);
    FILE* f = std::fopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr) << path;
    if (f == nullptr) return path;
    if (size > 0) {
      EXPECT_EQ(std::fwrite(bytes.data(), 1, size, f), size);
    }
    std::fclose(f);
    return path;
  }

  LocalFileOptions FileOptions(uint32_t threads = 2) const {
    LocalFileOptions o;
    o.threads = threads;
    o.engine = GetParam().engine;
    o.direct = GetParam().direct;
    o.try_inline = GetParam().try_inline;
    o.hit_threads = GetParam().hit_threads;
    return o;
  }

  // Opens `path` with this engine; skips the test when the file system of
  // the temp dir cannot do O_DIRECT (tmpfs before Linux 6.6, ...).
  std::shared_ptr<Source> Open(const std::string& path, uint32_t threads = 2) {
    auto source = OpenLocalFile(path, FileOptions(threads));
    if (!source.ok() && GetParam().direct &&
        source.status().code() == StatusCode::kInvalidArgument &&
        source.status().message().find("O_DIRECT") != std::string::npos) {
      skip_ = source.status().ToString();
      return nullptr;
    }
    EXPECT_TRUE(source.ok()) << source.status().ToString();
    return source.ok() ? *source : nullptr;
  }

  // The suite tests the backends: unless told otherwise, each range is its
  // own read (no planner), so that reads are the ones the test describes.
  Reader OpenReader(std::shared_ptr<Source> source, Options options,
                    std::shared_ptr<Limiter> limiter = nullptr) {
    if (!options.planner) options.planner = PlannerOptions::None();
    auto reader = Reader::Open(std::move(source), options, std::move(limiter));
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    return std::move(reader).value();
  }

  std::string dir_;
  std::vector<std::string> files_;
  std::string skip_;
};

#define OPEN_OR_SKIP(var, ...)                       \
  auto var = Open(__VA_ARGS__);                      \
  if (!var && !skip_.empty()) GTEST_SKIP() << skip_; \
  ASSERT_NE(var, nullptr)

INSTANTIATE_TEST_SUITE_P(Engines, LocalConformanceTest,
                         ::testing::ValuesIn(kEngines),
                         [](const auto& info) { return info.param.name; });

// Waits until nothing is in flight or retained on `l`: every permit and
// every byte of response budget came back.
void ExpectLimiterDrains(const Limiter& l) {
  EXPECT_TRUE(WaitUntil([&] {
    Stats s = l.GetStats();
    return s.in_flight == 0 && s.retained_count == 0 && s.retained_bytes == 0;
  })) << l.GetStats().ToString();
  EXPECT_EQ(l.GetStats().waiting_streams, 0u);
}

TEST_P(LocalConformanceTest, DescribeNamesTheEngine) {
  std::string path = WriteFile("d.bin", 10);
  OPEN_OR_SKIP(source, path);
  const std::string d = source->Describe();
  EXPECT_THAT(
      d, StartsWith(GetParam().engine == LocalEngine::kPread ? "pread pool"
                                                             : "io_uring"));
  EXPECT_THAT(d, HasSubstr(GetParam().direct ? "O_DIRECT" : "buffered"));
  EXPECT_EQ(d.find("inline") != std::string::npos, GetParam().try_inline) << d;
  EXPECT_EQ(d.find("helper thread") != std::string::npos,
            GetParam().try_inline && GetParam().engine == LocalEngine::kPread &&
                GetParam().hit_threads.value_or(1) > 0)
      << d;
}

TEST_P(LocalConformanceTest, UnalignedReadsReturnExactBytes) {
  constexpr size_t kSize = 3 * (1 << 20) + 13;  // past the pool's 1 MiB class
  std::string path = WriteFile("data.bin", kSize);
  OPEN_OR_SKIP(source, path);
  EXPECT_EQ(source->name(), path);
  auto size = source->Size();
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, kSize);

  std::vector<ByteRange> ranges = {
      {0, 1},         {kSize - 1, 1},  {0, kSize},           {kSize, 0},
      {4095, 2},      {123456, 65536}, {kSize - 4096, 4096}, {511, 513},
      {512, 512},     {4096, 4096},    {1, kSize - 2},       {kSize - 13, 13},
      {4097, 1 << 20}};
  std::mt19937_64 rng(11);
  for (int i = 0; i < 200; ++i) {
    const uint64_t len = 1 + rng() % 20000;
    ranges.push_back({rng() % (kSize - len + 1), len});
  }
  CollectingSink sink;
  for (size_t i = 0; i < ranges.size(); ++i) source->Read(ranges[i], &sink, i);
  ASSERT_TRUE(sink.WaitFor(ranges.size()));
  EXPECT_EQ(sink.duplicates(), 0u);
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto d = sink.Get(i);
    ASSERT_TRUE(d.bytes.ok())
        << ranges[i].ToString() << ": " << d.bytes.status().ToString();
    EXPECT_TRUE(MatchesPattern(ranges[i], d.bytes->span()))
        << ranges[i].ToString();
  }
}

// Wide reads (what a coalescing planner issues; io_uring with O_DIRECT
// reads those of 64 KiB..1 MiB into registered buffers, reused once their
// slices are released): every slice keeps its bytes for as long as the
// caller holds it, while later reads reuse buffers released before.
TEST_P(LocalConformanceTest, WideReadsKeepTheirBytesWhileHeld) {
  constexpr size_t kSize = 8 << 20;
  std::string path = WriteFile("wide.bin", kSize);
  OPEN_OR_SKIP(source, path, 4);
  std::mt19937_64 rng(9);
  std::vector<ByteRange> ranges;
  for (int i = 0; i < 40; ++i) {
    const uint64_t len = (64 << 10) + rng() % (1 << 20);
    ranges.push_back({rng() % (kSize - len + 1), len});
  }
  Reader reader = OpenReader(source, LimitOptions(4, 128, 128 << 20));
  // Pass 1's slices are held through passes 2 (released as read) and 3
  // (held), then checked again.
  std::vector<testing::DrainResult> held;
  for (bool keep : {true, false, true}) {
    auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    held.push_back(testing::Drain(*stream, ranges, nullptr, keep));
    const testing::DrainResult& out = held.back();
    ASSERT_TRUE(out.status.ok()) << out.status.ToString();
    EXPECT_EQ(out.bad_bytes, 0u);
    ASSERT_EQ(out.indexes.size(), ranges.size());
  }
  for (const testing::DrainResult& out : held) {
    for (size_t i = 0; i < out.slices.size(); ++i) {
      EXPECT_TRUE(MatchesPattern(ranges[out.indexes[i]], out.slices[i].span()))
          << ranges[out.indexes[i]].ToString();
    }
  }
  if (GetParam().engine == LocalEngine::kUring && GetParam().direct) {
    const std::string d = source->Describe();
    EXPECT_THAT(d, HasSubstr("registered 1 MiB buffers")) << d;
    EXPECT_EQ(d.find("(0 into registered buffers)"), std::string::npos) << d;
  }
}

TEST_P(LocalConformanceTest, ReadsFromManyThreadsCompleteExactlyOnce) {
  constexpr size_t kSize = 1 << 20;
  std::string path = WriteFile("threads.bin", kSize);
  OPEN_OR_SKIP(source, path, 8);
  constexpr int kThreads = 4;
  constexpr int kPerThread = 300;
  std::vector<ByteRange> ranges;
  std::mt19937_64 rng(3);
  for (int i = 0; i < kThreads * kPerThread; ++i) {
    const uint64_t len = 1 + rng() % 9000;
    ranges.push_back({rng() % (kSize - len + 1), len});
  }
  CollectingSink sink;
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = t * kPerThread; i < (t + 1) * kPerThread; ++i) {
          source->Read(ranges[i], &sink, i);
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  ASSERT_TRUE(sink.WaitFor(ranges.size()));
  EXPECT_EQ(sink.duplicates(), 0u);
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto d = sink.Get(i);
    ASSERT_TRUE(d.bytes.ok()) << d.bytes.status().ToString();
    EXPECT_TRUE(MatchesPattern(ranges[i], d.bytes->span()))
        << ranges[i].ToString();
  }
}

// The Reader's invariants hold over a real file: in-flight within C,
// retained responses and bytes within the budget, and once the streams end
// every permit and every budget byte is back.
TEST_P(LocalConformanceTest, ReaderInvariantsOverManyRanges) {
  constexpr size_t kSize = 300'007;
  constexpr uint32_t kC = 6;
  constexpr uint64_t kBudgetBytes = 64 * 1024;
  std::string path = WriteFile("many.bin", kSize);
  OPEN_OR_SKIP(source, path, 3);
  Reader reader = OpenReader(source, LimitOptions(kC, 10, kBudgetBytes));
  std::mt19937_64 rng(5);
  std::vector<ByteRange> ranges = {{kSize - 1, 1}, {0, 1}, {kSize - 100, 100}};
  for (int i = 0; i < 400; ++i) {
    const uint64_t len = rng() % 9000;
    ranges.push_back({rng() % (kSize - len + 1), len});
  }
  for (Delivery d : {Delivery::kOrdered, Delivery::kAsCompleted}) {
    auto stream = reader.ReadRanges(ranges, d);
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    auto out = testing::Drain(*stream, ranges);
    ASSERT_TRUE(out.status.ok()) << out.status.ToString();
    ASSERT_EQ(out.indexes.size(), ranges.size());
    EXPECT_EQ(out.bad_bytes, 0u);
  }
  ExpectLimiterDrains(*reader.limiter());
  Stats s = reader.limiter()->GetStats();
  EXPECT_LE(s.peak_in_flight, kC);
  EXPECT_LE(s.peak_retained_count, 10u);
  EXPECT_LE(s.peak_retained_bytes, kBudgetBytes);
  EXPECT_EQ(s.read_errors, 0u);
  EXPECT_EQ(s.ranges_delivered, 2 * ranges.size());
}

TEST_P(LocalConformanceTest, RangesEndingExactlyAtTheEndOfFile) {
  // Sizes on, just past and just short of alignment boundaries.
  for (size_t size : {size_t{8192}, size_t{8193}, size_t{4095}, size_t{1},
                      size_t{3 * 4096 + 511}}) {
    SCOPED_TRACE(size);
    std::string path = WriteFile("end" + std::to_string(size) + ".bin", size);
    OPEN_OR_SKIP(source, path);
    Reader reader = OpenReader(source, LimitOptions(4));
    std::vector<ByteRange> ranges = {
        {0, size}, {size - 1, 1}, {size, 0}, {size / 2, size - size / 2}};
    if (size > 512) ranges.push_back({size - 512, 512});
    auto stream = reader.ReadRanges(ranges, Delivery::kOrdered);
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    auto out = testing::Drain(*stream, ranges);
    ASSERT_TRUE(out.status.ok()) << out.status.ToString();
    EXPECT_EQ(out.indexes.size(), ranges.size());
    EXPECT_EQ(out.bad_bytes, 0u);
  }
}

TEST_P(LocalConformanceTest, RangesPastTheEndAreOutOfRangeBeforeAnyIo) {
  std::string path = WriteFile("past.bin", 10'000);
  OPEN_OR_SKIP(source, path);
  Reader reader = OpenReader(source, LimitOptions(4));
  for (ByteRange past : {ByteRange{9990, 11}, ByteRange{10'000, 1},
                         ByteRange{20'000, 0}, ByteRange{0, 10'001}}) {
    const std::vector<ByteRange> ranges = {{0, 10}, past};
    auto bad = reader.ReadRanges(ranges);
    ASSERT_FALSE(bad.ok()) << past.ToString();
    EXPECT_EQ(bad.status().code(), StatusCode::kOutOfRange);
    EXPECT_THAT(bad.status().message(), HasSubstr(path));
    EXPECT_THAT(bad.status().message(), HasSubstr(past.ToString()));
  }
  EXPECT_EQ(reader.limiter()->GetStats().physical_reads, 0u);
}

// A read the source is given past the end of the file (the file shrank
// after the caller checked its size) is an error naming the file, never
// short data.
TEST_P(LocalConformanceTest, SourceReadPastTheEndIsAnErrorNamingTheFile) {
  std::string path = WriteFile("short.bin", 5000);
  OPEN_OR_SKIP(source, path);
  CollectingSink sink;
  source->Read({4000, 2000}, &sink, 0);
  source->Read({6000, 10}, &sink, 1);
  ASSERT_TRUE(sink.WaitFor(2));
  for (uint64_t tag : {0, 1}) {
    auto d = sink.Get(tag);
    ASSERT_FALSE(d.bytes.ok()) << tag;
    EXPECT_EQ(d.bytes.status().code(), StatusCode::kIoError);
    EXPECT_THAT(d.bytes.status().message(), HasSubstr(path));
    EXPECT_THAT(d.bytes.status().message(), HasSubstr("file truncated?"));
  }
}

TEST_P(LocalConformanceTest, EmptyFile) {
  std::string path = WriteFile("empty.bin", 0);
  OPEN_OR_SKIP(source, path);
  EXPECT_EQ(*source->Size(), 0u);
  Reader reader = OpenReader(source, LimitOptions(2));
  const std::vector<ByteRange> zero = {{0, 0}};
  auto stream = reader.ReadRanges(zero);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  auto out = testing::Drain(*stream, {}, nullptr, /*keep_slices=*/true);
  ASSERT_TRUE(out.status.ok());
  ASSERT_EQ(out.slices.size(), 1u);
  EXPECT_TRUE(out.slices[0].empty());
  const std::vector<ByteRange> one = {{0, 1}};
  EXPECT_EQ(reader.ReadRanges(one).status().code(), StatusCode::kOutOfRange);
}

// A file that shrinks after its size was taken must give an error, never
// short data.
TEST_P(LocalConformanceTest, FileTruncatedAfterOpenIsAnErrorNotShortData) {
  std::string path = WriteFile("shrinks.bin", 8192);
  OPEN_OR_SKIP(source, path);
  ASSERT_EQ(*source->Size(), 8192u);
  ASSERT_EQ(::truncate(path.c_str(), 100), 0);
  Reader reader = OpenReader(source, LimitOptions(2));
  const std::vector<ByteRange> ranges = {{0, 50}, {0, 8192}};
  auto stream = reader.ReadRanges(ranges);
  if (!stream.ok()) {  // a re-stat noticed the new size
    EXPECT_EQ(stream.status().code(), StatusCode::kOutOfRange);
    return;
  }
  auto out = testing::Drain(*stream, {}, nullptr, /*keep_slices=*/true);
  ASSERT_FALSE(out.status.ok()) << "short read returned as success";
  EXPECT_EQ(out.status.code(), StatusCode::kIoError) << out.status.ToString();
  EXPECT_THAT(out.status.message(), HasSubstr(path));
  EXPECT_THAT(out.status.message(), HasSubstr("[0, 8192)"));
  for (const Slice& s : out.slices) EXPECT_EQ(s.size(), 50u);
}

// Reads queued in the Reader (the response budget is full: the consumer
// holds both results) meet a file truncated under them: the first read past
// the new end fails naming the file and its range, the reads before it
// deliver their bytes, and every permit comes back.
TEST_P(LocalConformanceTest, FileTruncatedWhileReadsAreQueued) {
  constexpr uint64_t kLen = 4096;
  std::string path = WriteFile("queued.bin", 16 * kLen);
  OPEN_OR_SKIP(source, path);
  Reader reader = OpenReader(source, LimitOptions(2, 2));
  const auto ranges = testing::SpreadRanges(8, kLen, 2 * kLen);
  auto stream = reader.ReadRanges(ranges, Delivery::kOrdered);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  std::vector<Slice> held;
  for (int i = 0; i < 2; ++i) {
    auto next = stream->Next();
    ASSERT_TRUE(next.ok() && next->has_value()) << next.status().ToString();
    EXPECT_TRUE(MatchesPattern(ranges[(*next)->index], (*next)->bytes.span()));
    held.push_back(std::move((*next)->bytes));
  }
  // Budget full: ranges 2..7 wait in the reader, none is in the source
  // (the limiter hears of a completion just after the stream does).
  EXPECT_TRUE(
      WaitUntil([&] { return reader.limiter()->GetStats().in_flight == 0; }));
  EXPECT_LE(reader.limiter()->GetStats().peak_in_flight, 2u);
  ASSERT_EQ(::truncate(path.c_str(), 5 * kLen + 100), 0);
  held.clear();
  auto out = testing::Drain(*stream, ranges);
  ASSERT_FALSE(out.status.ok());
  EXPECT_EQ(out.status.code(), StatusCode::kIoError) << out.status.ToString();
  EXPECT_THAT(out.status.message(), HasSubstr(path));
  EXPECT_THAT(out.status.message(), HasSubstr(ranges[3].ToString()));
  EXPECT_THAT(out.status.message(), HasSubstr("file truncated?"));
  EXPECT_EQ(out.indexes, std::vector<size_t>({2}));  // ends before the cut
  EXPECT_EQ(out.bad_bytes, 0u);
  ExpectLimiterDrains(*reader.limiter());
}

// Truncation racing reads already in the engine: whatever the timing, each
// read gives its full length or an IoError naming the file, never short
// data. Reads wholly before the cut give exactly their bytes. A read that
// races the cut of its own bytes gets what the kernel had at that instant:
// the old bytes, or zeros (Linux zeroes the part of a large page-cache
// folio beyond the new end before dropping it; seen here under TSan and in
// about one release run in ten).
TEST_P(LocalConformanceTest, TruncationRacingReadsNeverGivesShortData) {
  constexpr size_t kSize = 1 << 20;
  constexpr size_t kCut = kSize / 2;
  std::string path = WriteFile("race.bin", kSize);
  OPEN_OR_SKIP(source, path, 16);
  const auto ranges = testing::SpreadRanges(256, 3000, 4096, 7);
  CollectingSink sink;
  for (size_t i = 0; i < ranges.size(); ++i) source->Read(ranges[i], &sink, i);
  ASSERT_EQ(::truncate(path.c_str(), kCut), 0);
  ASSERT_TRUE(sink.WaitFor(ranges.size()));
  for (size_t i = 0; i < ranges.size(); ++i) {
    const ByteRange& r = ranges[i];
    auto d = sink.Get(i);
    if (r.end() <= kCut) {
      ASSERT_TRUE(d.bytes.ok()) << r.ToString() << d.bytes.status().ToString();
      EXPECT_TRUE(MatchesPattern(r, d.bytes->span())) << r.ToString();
      continue;
    }
    if (!d.bytes.ok()) {
      EXPECT_EQ(d.bytes.status().code(), StatusCode::kIoError);
      EXPECT_THAT(d.bytes.status().message(), HasSubstr(path));
      continue;
    }
    ASSERT_EQ(d.bytes->size(), r.length) << r.ToString();
    for (size_t k = 0; k < r.length; ++k) {
      const std::byte b = d.bytes->data()[k];
      ASSERT_TRUE(b == testing::PatternByteAt(r.offset + k) ||
                  b == std::byte{0})
          << r.ToString() << " byte " << k;
    }
  }
}

// An open file that is removed stays readable to completion.
TEST_P(LocalConformanceTest, FileRemovedWhileReadsAreQueued) {
  constexpr uint64_t kLen = 4096;
  std::string path = WriteFile("removed.bin", 16 * kLen);
  OPEN_OR_SKIP(source, path);
  Reader reader = OpenReader(source, LimitOptions(2, 2));
  const auto ranges = testing::SpreadRanges(8, kLen, 2 * kLen, 1);
  auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  std::vector<Slice> held;
  for (int i = 0; i < 2; ++i) {
    auto next = stream->Next();
    ASSERT_TRUE(next.ok() && next->has_value()) << next.status().ToString();
    held.push_back(std::move((*next)->bytes));
  }
  ASSERT_EQ(::unlink(path.c_str()), 0);
  held.clear();
  auto out = testing::Drain(*stream, ranges);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.indexes.size(), 6u);
  EXPECT_EQ(out.bad_bytes, 0u);
  ExpectLimiterDrains(*reader.limiter());
}

// A stream dropped mid-way with reads in the engine: the reads in flight
// complete into the void, every permit and budget byte comes back, and the
// source outlives them.
TEST_P(LocalConformanceTest, CancellationMidwayReturnsEveryPermit) {
  constexpr size_t kSize = 4 << 20;
  std::string path = WriteFile("cancel.bin", kSize);
  OPEN_OR_SKIP(source, path, 8);
  Reader reader = OpenReader(source, LimitOptions(8));
  const auto ranges = testing::SpreadRanges(1000, 4000, 4096, 3);
  auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok());
  for (int i = 0; i < 10; ++i) {
    auto next = stream->Next();
    ASSERT_TRUE(next.ok() && next->has_value()) << next.status().ToString();
    EXPECT_TRUE(MatchesPattern(ranges[(*next)->index], (*next)->bytes.span()));
  }
  stream->Cancel();
  auto after = stream->Next();
  EXPECT_EQ(after.status().code(), StatusCode::kCancelled);
  ExpectLimiterDrains(*reader.limiter());
  Stats s = reader.limiter()->GetStats();
  EXPECT_LE(s.peak_in_flight, 8u);
  EXPECT_LT(s.physical_reads, ranges.size());

  // The same reader still reads.
  const std::vector<ByteRange> again = {{kSize - 10, 10}};
  auto s2 = reader.ReadRanges(again);
  ASSERT_TRUE(s2.ok());
  auto out = testing::Drain(*s2, again);
  EXPECT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.bad_bytes, 0u);
}

// The stream is the last owner of the source, and is dropped with reads in
// flight: the engine's own thread then destroys the source from inside a
// completion, which must neither deadlock (joining itself) nor leak.
TEST_P(LocalConformanceTest, SourceReleasedFromItsOwnCompletion) {
  std::string path = WriteFile("last.bin", 1 << 20);
  std::weak_ptr<Source> weak;
  std::shared_ptr<Limiter> limiter;
  {
    OPEN_OR_SKIP(source, path, 4);
    weak = source;
    Reader reader = OpenReader(source, LimitOptions(4));
    limiter = reader.limiter();
    const auto ranges = testing::SpreadRanges(200, 1000, 4096);
    auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
    ASSERT_TRUE(stream.ok());
    auto first = stream->Next();
    ASSERT_TRUE(first.ok() && first->has_value());
    source.reset();
    // `reader` and `stream` go out of scope here: the stream's in-flight
    // reads hold the last reference.
  }
  EXPECT_TRUE(WaitUntil([&] { return weak.expired(); }));
  ExpectLimiterDrains(*limiter);
}

TEST_P(LocalConformanceTest, ConcurrentReadersShareALimiter) {
  constexpr size_t kSize = 64 * 1024;
  std::string p1 = WriteFile("a.bin", kSize), p2 = WriteFile("b.bin", kSize);
  auto limiter = Limiter::Make(LimitOptions(3));
  ASSERT_TRUE(limiter.ok());
  OPEN_OR_SKIP(s1, p1, 3);
  OPEN_OR_SKIP(s2, p2, 3);
  Reader r1 = OpenReader(s1, {}, *limiter);
  Reader r2 = OpenReader(s2, {}, *limiter);
  const auto ranges = testing::SpreadRanges(200, 300, 320);
  auto st1 = r1.ReadRanges(ranges, Delivery::kAsCompleted);
  auto st2 = r2.ReadRanges(ranges, Delivery::kOrdered);
  ASSERT_TRUE(st1.ok() && st2.ok());
  {
    testing::StreamConsumer c1(std::move(*st1), ranges);
    testing::StreamConsumer c2(std::move(*st2), ranges);
    ASSERT_TRUE(c1.WaitForDone());
    ASSERT_TRUE(c2.WaitForDone());
    EXPECT_TRUE(c1.final_status().ok()) << c1.final_status().ToString();
    EXPECT_TRUE(c2.final_status().ok()) << c2.final_status().ToString();
    EXPECT_EQ(c1.count(), 200u);
    EXPECT_EQ(c2.count(), 200u);
    EXPECT_EQ(c1.bad_bytes() + c2.bad_bytes(), 0u);
  }
  ExpectLimiterDrains(**limiter);
  Stats s = (*limiter)->GetStats();
  EXPECT_LE(s.peak_in_flight, 3u);
  EXPECT_LE(s.peak_retained_count, 6u);
  EXPECT_EQ(s.ranges_delivered, 400u);
}

TEST_P(LocalConformanceTest, OpenSourceTakesFileUrls) {
  std::string path = WriteFile("url file.bin", 10'000);
  SourceOptions options;
  options.local = FileOptions();
  for (const std::string& name :
       {path, "file://" + dir_ + "/url%20file.bin",
        "file://localhost" + dir_ + "/url%20file.bin"}) {
    SCOPED_TRACE(name);
    auto source = OpenSource(name, options);
    if (!source.ok() && GetParam().direct &&
        source.status().message().find("O_DIRECT") != std::string::npos) {
      GTEST_SKIP() << source.status().ToString();
    }
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    EXPECT_EQ((*source)->name(), path);
    Reader reader = OpenReader(*source, LimitOptions(2));
    const std::vector<ByteRange> ranges = {{9999, 1}, {0, 10'000}, {5000, 0}};
    auto stream = reader.ReadRanges(ranges);
    ASSERT_TRUE(stream.ok());
    auto out = testing::Drain(*stream, ranges);
    ASSERT_TRUE(out.status.ok()) << out.status.ToString();
    EXPECT_EQ(out.bad_bytes, 0u);
  }
}

TEST_P(LocalConformanceTest, MissingFileIsNotFoundNamingThePath) {
  std::string path = dir_ + "/no-such-file.bin";
  auto source = OpenLocalFile(path, FileOptions());
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(source.status().message(), HasSubstr(path));
}

TEST_P(LocalConformanceTest, DirectoryIsInvalidArgumentNamingThePath) {
  auto source = OpenLocalFile(dir_, FileOptions());
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(source.status().message(), HasSubstr(dir_));
  EXPECT_THAT(source.status().message(), HasSubstr("not a regular file"));
}

TEST_P(LocalConformanceTest, UnreadableFileIsPermissionDenied) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads any file";
  std::string path = WriteFile("secret.bin", 10);
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  auto source = OpenLocalFile(path, FileOptions());
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(source.status().message(), HasSubstr(path));
}

TEST_P(LocalConformanceTest, InvalidThreadCountIsRejected) {
  std::string path = WriteFile("t.bin", 10);
  for (uint32_t threads : {0u, 4097u}) {
    auto source = OpenLocalFile(path, FileOptions(threads));
    ASSERT_FALSE(source.ok()) << threads;
    EXPECT_EQ(source.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(source.status().message(), HasSubstr(path));
  }
}

// --- Not per engine --------------------------------------------------------

class LocalFileTest : public LocalConformanceTest {};
INSTANTIATE_TEST_SUITE_P(Default, LocalFileTest,
                         ::testing::Values(Engine{"auto", LocalEngine::kAuto,
                                                  false, true}),
                         [](const auto& info) { return info.param.name; });

TEST_P(LocalFileTest, ReaderOpenFileUsesTheDefaultEngine) {
  std::string path = WriteFile("open.bin", 10'000);
  auto reader = Reader::OpenFile(path, LimitOptions(4));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ(reader->source()->name(), path);
  EXPECT_THAT(reader->source()->Describe(),
              StartsWith(DefaultLocalEngine(false) == LocalEngine::kUring
                             ? "io_uring, queue depth 4"
                             : "pread pool, up to 4 threads"));
  const std::vector<ByteRange> ranges = {{0, 10'000}};
  auto stream = reader->ReadRanges(ranges, Delivery::kOrdered);
  ASSERT_TRUE(stream.ok());
  auto out = testing::Drain(*stream, ranges);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.bad_bytes, 0u);

  auto missing = Reader::OpenFile(dir_ + "/missing.bin");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto dir = Reader::OpenFile(dir_);
  EXPECT_EQ(dir.status().code(), StatusCode::kInvalidArgument);
  auto bad = Reader::OpenFile(path, LimitOptions(0));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("read-thread-num"));
}

// Makes io_uring_setup fail with EPERM on the calling thread and the threads
// it starts from now on, as a container's seccomp profile does; the rest of
// the process is untouched. False when the kernel refuses the filter.
bool DenyIoUringOnThisThread() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog prog{static_cast<unsigned short>(std::size(filter)), filter};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

// Where io_uring is refused, the default engine falls back to the pread pool
// and says why; an explicit io_uring request fails naming file and cause.
TEST_P(LocalFileTest, IoUringRefusedFallsBackToPreadAndSaysSo) {
  std::string path = WriteFile("fallback.bin", 10'000);
  bool filtered = false;
  Result<std::shared_ptr<Source>> fallback = Status::Internal("not run");
  Result<std::shared_ptr<Source>> explicit_uring = Status::Internal("not run");
  std::thread denied([&] {
    filtered = DenyIoUringOnThisThread();
    if (!filtered) return;
    LocalFileOptions o;
    o.engine = LocalEngine::kAuto;
    o.direct = true;  // kAuto's engine for O_DIRECT files is io_uring
    fallback = OpenLocalFile(path, o);
    o.engine = LocalEngine::kUring;
    o.direct = false;
    explicit_uring = OpenLocalFile(path, o);
  });
  denied.join();
  if (!filtered) GTEST_SKIP() << "seccomp filters are not allowed here";
  if (!fallback.ok() &&
      fallback.status().code() == StatusCode::kInvalidArgument &&
      fallback.status().message().find("direct") != std::string::npos) {
    GTEST_SKIP() << "no O_DIRECT here: " << fallback.status().ToString();
  }

  ASSERT_FALSE(explicit_uring.ok());
  EXPECT_EQ(explicit_uring.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(explicit_uring.status().message(), HasSubstr(path));
  EXPECT_THAT(explicit_uring.status().message(), HasSubstr("io_uring"));

  ASSERT_TRUE(fallback.ok()) << fallback.status().ToString();
  const std::string d = (*fallback)->Describe();
  if (DefaultLocalEngine(true) == LocalEngine::kUring) {
    EXPECT_THAT(d, StartsWith("pread pool"));
    EXPECT_THAT(d, HasSubstr("io_uring unavailable"));
    EXPECT_THAT(d, HasSubstr("errno 1"));
  }
  Reader reader = OpenReader(*fallback, LimitOptions(4));
  const std::vector<ByteRange> ranges = {{9999, 1}, {0, 10'000}, {17, 4000}};
  auto stream = reader.ReadRanges(ranges, Delivery::kAsCompleted);
  ASSERT_TRUE(stream.ok());
  auto out = testing::Drain(*stream, ranges);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  EXPECT_EQ(out.bad_bytes, 0u);
}

// Many short streams over the pread pool (completions on several threads at
// once), each dropped, with its reader and limiter, as soon as it is
// drained. Before every completion held its stream (reader.cc), TSan and
// ASan reported a use-after-free of the stream or its limiter here within a
// few hundred rounds.
TEST_P(LocalFileTest, ReaderSurvivesConcurrentCompletions) {
  std::string path = WriteFile("tails.bin", 1 << 20);
  LocalFileOptions o;
  o.engine = LocalEngine::kPread;
  o.threads = 8;
  o.try_inline = false;  // every completion on a pool thread
  auto source = OpenLocalFile(path, o);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  const auto ranges = testing::SpreadRanges(16, 3000, 4096, 5);
  for (int round = 0; round < 2000; ++round) {
    auto reader = Reader::Open(*source, LimitOptions(8));
    ASSERT_TRUE(reader.ok());
    auto stream = reader->ReadRanges(ranges, Delivery::kAsCompleted);
    ASSERT_TRUE(stream.ok());
    auto out = testing::Drain(*stream, ranges);
    ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  }
}

TEST(LocalEngineTest, NamesRoundTrip) {
  for (LocalEngine e :
       {LocalEngine::kAuto, LocalEngine::kPread, LocalEngine::kUring}) {
    auto parsed = ParseLocalEngine(LocalEngineName(e));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, e);
  }
  auto bad = ParseLocalEngine("aio");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("'aio'"));
  EXPECT_THAT(bad.status().message(), HasSubstr("auto, pread, uring"));
}

// Page-cache hits queued for helper threads (LocalFileOptions::hit_threads).
class LocalHitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "rangeio_hits_" +
            std::to_string(::getpid()) + ".bin";
    FILE* f = std::fopen(path_.c_str(), "wb");
    ASSERT_NE(f, nullptr) << path_;
    std::vector<std::byte> bytes(kSize);
    for (size_t i = 0; i < kSize; ++i) bytes[i] = testing::PatternByteAt(i);
    ASSERT_EQ(std::fwrite(bytes.data(), 1, kSize, f), kSize);
    std::fclose(f);
  }
  void TearDown() override { ::unlink(path_.c_str()); }

  std::shared_ptr<Source> Open(uint32_t hit_threads) {
    LocalFileOptions o;
    o.engine = LocalEngine::kPread;
    o.threads = 4;
    o.hit_threads = hit_threads;
    auto source = OpenLocalFile(path_, o);
    EXPECT_TRUE(source.ok()) << source.status().ToString();
    return source.ok() ? *source : nullptr;
  }

  static constexpr size_t kSize = 1 << 20;
  std::string path_;
};

// Reads given at once reach the helper together: it completes them in
// batches (OnReadsDone with more than one), each read exactly once with its
// bytes; a consumer's Assist runs at most what it is asked for.
TEST_F(LocalHitsTest, HelpersCompleteQueuedHitsInBatches) {
  auto source = Open(1);
  ASSERT_NE(source, nullptr);
  class BatchSink final : public ReadSink {
   public:
    void OnReadDone(uint64_t tag, Result<Slice> bytes) override {
      ReadCompletion c{tag, std::move(bytes)};
      OnReadsDone({&c, 1});
    }
    void OnReadsDone(std::span<ReadCompletion> done) override {
      std::lock_guard lk(mu);
      largest = std::max(largest, done.size());
      for (ReadCompletion& c : done)
        got.emplace_back(c.tag, std::move(c.bytes));
    }
    size_t count() {
      std::lock_guard lk(mu);
      return got.size();
    }
    std::mutex mu;
    size_t largest = 0;
    std::vector<std::pair<uint64_t, Result<Slice>>> got;
  } sink;
  constexpr size_t kReads = 64;
  std::vector<ReadRequest> reads;
  for (size_t i = 0; i < kReads; ++i) {
    reads.push_back({{i * 8192 + 100, 4000}, i});
  }
  // The file was just written: its pages are cached.
  source->ReadMany(reads, &sink);
  EXPECT_LE(source->Assist(3), 3u);
  ASSERT_TRUE(WaitUntil([&] { return sink.count() == kReads; }));
  std::vector<bool> seen(kReads);
  for (auto& [tag, bytes] : sink.got) {
    ASSERT_LT(tag, kReads);
    EXPECT_FALSE(seen[tag]) << "read " << tag << " completed twice";
    seen[tag] = true;
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    EXPECT_TRUE(MatchesPattern(reads[tag].range, bytes->span())) << tag;
  }
  EXPECT_GT(sink.largest, 1u) << "no read was completed in a batch";
  EXPECT_EQ(source->Assist(8), 0u) << "nothing is left queued";
}

// Through a Reader, with the consumer assisting: every range once with its
// bytes, within the bounds, in both delivery modes; also when the file has
// left the page cache (misses go on to the blocking pool).
TEST_F(LocalHitsTest, ReaderGetsEveryRangeOnceWithHelpers) {
  for (bool evict : {false, true}) {
    for (Delivery delivery : {Delivery::kOrdered, Delivery::kAsCompleted}) {
      auto source = Open(2);
      ASSERT_NE(source, nullptr);
      if (evict) {
        const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
        ASSERT_GE(fd, 0);
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        ::close(fd);
      }
      Options o = LimitOptions(4);
      o.planner = PlannerOptions::None();
      auto reader = Reader::Open(source, o);
      ASSERT_TRUE(reader.ok());
      std::vector<ByteRange> ranges;
      for (uint64_t i = 0; i < 120; ++i) {
        ranges.push_back({(i * 7919 * 4096) % (kSize - 5000), 5000});
      }
      auto stream = reader->ReadRanges(ranges, delivery);
      ASSERT_TRUE(stream.ok());
      auto out = testing::Drain(*stream, ranges);
      EXPECT_TRUE(out.status.ok()) << out.status.ToString();
      EXPECT_EQ(out.bad_bytes, 0u);
      std::vector<size_t> idx = out.indexes;
      if (delivery == Delivery::kAsCompleted) std::sort(idx.begin(), idx.end());
      ASSERT_EQ(idx.size(), ranges.size());
      for (size_t i = 0; i < idx.size(); ++i) EXPECT_EQ(idx[i], i);
      const Stats st = reader->limiter()->GetStats();
      EXPECT_LE(st.peak_in_flight, 4u);
      EXPECT_LE(st.peak_retained_count, 8u);
      EXPECT_EQ(st.physical_reads, ranges.size());
      ExpectLimiterDrains(*reader->limiter());
    }
  }
}

TEST(LocalFileOptionsTest, HitThreadsOutOfRangeIsRejected) {
  LocalFileOptions o;
  o.hit_threads = 5000;
  auto source = OpenLocalFile("/dev/null", o);
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(source.status().message(), HasSubstr("hit_threads=5000"));
  EXPECT_THAT(source.status().message(), HasSubstr("/dev/null"));
  EXPECT_THAT(source.status().message(), HasSubstr("0..4096"));
}

}  // namespace
}  // namespace rangeio
