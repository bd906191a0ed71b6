// What every local-file engine must do beyond the contract of every Source
// (source_conformance_test.cc runs that over these same engines): the pread
// pool and io_uring, each buffered (with and without the inline preadv2
// attempt, with and without hit helpers) and with O_DIRECT. Real temp files
// of sizes on and around alignment boundaries, read back byte for byte:
// ranges ending at the end of the file, an empty file, files truncated or
// removed while reads are queued, errors that name the file and the range,
// what Info().description says, and how opening a file fails. Not per engine:
// local_file_test.cc and uring_direct_test.cc.
//
// Nothing here depends on timing: where a race is the point (a file
// truncated while reads are in flight), every outcome the race allows is
// checked to be a correct one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "rangeio/rangeio.h"
#include "support/collecting_sink.h"
#include "support/gated_source.h"
#include "support/test_util.h"

namespace rangeio {
namespace {

using testing::CollectingSink;
using testing::ExpectLimiterDrains;
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
  // A file of `size` pattern bytes (PatternByteAt).
  std::string WriteFile(const std::string& name, size_t size) {
    return scratch_.WriteFile(name, size);
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
    if (!options.reader.planner)
      options.reader.planner = PlannerOptions::None();
    auto reader = Reader::Open(std::move(source), options, std::move(limiter));
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    return std::move(reader).value();
  }

  testing::ScratchDir scratch_;
  const std::string dir_ = scratch_.path();
  std::string skip_;
};

#define OPEN_OR_SKIP(var, ...)                       \
  auto var = Open(__VA_ARGS__);                      \
  if (!var && !skip_.empty()) GTEST_SKIP() << skip_; \
  ASSERT_NE(var, nullptr)

INSTANTIATE_TEST_SUITE_P(Engines, LocalConformanceTest,
                         ::testing::ValuesIn(kEngines),
                         [](const ::testing::TestParamInfo<Engine>& p) {
                           return std::string(p.param.name);
                         });

TEST_P(LocalConformanceTest, DescribeNamesTheEngine) {
  std::string path = WriteFile("d.bin", 10);
  OPEN_OR_SKIP(source, path);
  const std::string d = source->Info().description;
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

// Bug 4: a FIFO is refused at once, not waited on in open() (which blocks
// until a writer comes).
TEST_P(LocalConformanceTest, FifoIsRefusedWithoutBlocking) {
  const std::string path = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  auto source = OpenLocalFile(path, FileOptions());
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(source.status().message(), HasSubstr(path));
  EXPECT_THAT(source.status().message(), HasSubstr("not a regular file"));
  ::unlink(path.c_str());
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

}  // namespace
}  // namespace rangeio
