// The local-file Source (pread pool, optional inline preadv2 attempt) and
// Reader::OpenFile: real temp files read back byte for byte, and every
// failure to open named with its path.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
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

class LocalFileTest : public ::testing::TestWithParam<bool> {
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

  // A file of `size` pattern bytes.
  std::string WriteFile(const std::string& name, size_t size) {
    std::string path = dir_ + "/" + name;
    files_.push_back(path);
    std::vector<std::byte> bytes(size);
    for (size_t i = 0; i < size; ++i) bytes[i] = testing::PatternByteAt(i);
    FILE* f = std::fopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
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
    o.try_inline = GetParam();
    return o;
  }

  std::string dir_;
  std::vector<std::string> files_;
};

INSTANTIATE_TEST_SUITE_P(TryInline, LocalFileTest, ::testing::Bool(),
                         [](const auto& info) {
                           return info.param ? "inline" : "pool";
                         });

TEST_P(LocalFileTest, DirectReadsReturnExactBytes) {
  constexpr size_t kSize = (1 << 20) + 13;
  std::string path = WriteFile("data.bin", kSize);
  auto source = OpenLocalFile(path, FileOptions());
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ((*source)->name(), path);
  auto size = (*source)->Size();
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, kSize);

  const std::vector<ByteRange> ranges = {
      {0, 1},    {kSize - 1, 1},  {0, kSize},          {kSize, 0},
      {4095, 2}, {123456, 65536}, {kSize - 4096, 4096}};
  CollectingSink sink;
  for (size_t i = 0; i < ranges.size(); ++i)
    (*source)->Read(ranges[i], &sink, i);
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

TEST_P(LocalFileTest, ReaderReadsManyRangesIncludingTheLastByte) {
  constexpr size_t kSize = 300'007;
  std::string path = WriteFile("many.bin", kSize);
  auto source = OpenLocalFile(path, FileOptions(3));
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  auto reader = Reader::Open(*source, LimitOptions(6));
  ASSERT_TRUE(reader.ok());
  std::mt19937_64 rng(5);
  std::vector<ByteRange> ranges = {{kSize - 1, 1}, {0, 1}, {kSize - 100, 100}};
  for (int i = 0; i < 300; ++i) {
    uint64_t len = rng() % 9000;
    ranges.push_back({rng() % (kSize - len + 1), len});
  }
  for (Delivery d : {Delivery::kOrdered, Delivery::kAsCompleted}) {
    auto stream = reader->ReadRanges(ranges, d);
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    auto out = testing::Drain(*stream, ranges);
    ASSERT_TRUE(out.status.ok()) << out.status.ToString();
    ASSERT_EQ(out.indexes.size(), ranges.size());
    EXPECT_EQ(out.bad_bytes, 0u);
  }
  Stats s = reader->limiter()->GetStats();
  EXPECT_LE(s.peak_in_flight, 6u);
  EXPECT_EQ(s.read_errors, 0u);
}

TEST_P(LocalFileTest, EmptyFile) {
  std::string path = WriteFile("empty.bin", 0);
  auto source = OpenLocalFile(path, FileOptions());
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ(*(*source)->Size(), 0u);
  auto reader = Reader::Open(*source, LimitOptions(2));
  ASSERT_TRUE(reader.ok());
  const std::vector<ByteRange> zero = {{0, 0}};
  auto stream = reader->ReadRanges(zero);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  auto out = testing::Drain(*stream, {}, nullptr, /*keep_slices=*/true);
  ASSERT_TRUE(out.status.ok());
  ASSERT_EQ(out.slices.size(), 1u);
  EXPECT_TRUE(out.slices[0].empty());
  const std::vector<ByteRange> one = {{0, 1}};
  EXPECT_EQ(reader->ReadRanges(one).status().code(), StatusCode::kOutOfRange);
}

// A file that shrinks after its size was taken must give an error, never
// short data.
TEST_P(LocalFileTest, FileTruncatedAfterOpenIsAnErrorNotShortData) {
  std::string path = WriteFile("shrinks.bin", 8192);
  auto source = OpenLocalFile(path, FileOptions());
  ASSERT_TRUE(source.ok());
  ASSERT_EQ(*(*source)->Size(), 8192u);
  ASSERT_EQ(::truncate(path.c_str(), 100), 0);
  auto reader = Reader::Open(*source, LimitOptions(2));
  ASSERT_TRUE(reader.ok());
  const std::vector<ByteRange> ranges = {{0, 50}, {0, 8192}};
  auto stream = reader->ReadRanges(ranges);
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

TEST_P(LocalFileTest, ReaderOpenFile) {
  std::string path = WriteFile("open.bin", 10'000);
  Options o = LimitOptions(4);
  auto reader = Reader::OpenFile(path, o);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ(reader->source()->name(), path);
  const std::vector<ByteRange> ranges = {{9999, 1}, {0, 10'000}, {5000, 0}};
  auto stream = reader->ReadRanges(ranges, Delivery::kOrdered);
  ASSERT_TRUE(stream.ok());
  auto out = testing::Drain(*stream, {}, nullptr, /*keep_slices=*/true);
  ASSERT_TRUE(out.status.ok()) << out.status.ToString();
  ASSERT_EQ(out.slices.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(MatchesPattern(ranges[i], out.slices[i].span())) << i;
  }

  const std::vector<ByteRange> past = {{9990, 11}};
  auto bad = reader->ReadRanges(past);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kOutOfRange);
  EXPECT_THAT(bad.status().message(), HasSubstr(path));
  EXPECT_THAT(bad.status().message(), HasSubstr("[9990, 10001)"));
}

TEST_P(LocalFileTest, MissingFileIsNotFoundNamingThePath) {
  std::string path = dir_ + "/no-such-file.bin";
  auto source = OpenLocalFile(path, FileOptions());
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(source.status().message(), HasSubstr(path));

  auto reader = Reader::OpenFile(path);
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(reader.status().message(), HasSubstr(path));
}

TEST_P(LocalFileTest, DirectoryIsInvalidArgumentNamingThePath) {
  auto source = OpenLocalFile(dir_, FileOptions());
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(source.status().message(), HasSubstr(dir_));

  auto reader = Reader::OpenFile(dir_);
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(reader.status().message(), HasSubstr(dir_));
}

TEST_P(LocalFileTest, UnreadableFileIsPermissionDenied) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads any file";
  std::string path = WriteFile("secret.bin", 10);
  ASSERT_EQ(::chmod(path.c_str(), 0), 0);
  auto source = OpenLocalFile(path, FileOptions());
  ASSERT_FALSE(source.ok());
  EXPECT_EQ(source.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(source.status().message(), HasSubstr(path));
}

TEST_P(LocalFileTest, InvalidThreadCountIsRejected) {
  std::string path = WriteFile("t.bin", 10);
  for (uint32_t threads : {0u, 4097u}) {
    auto source = OpenLocalFile(path, FileOptions(threads));
    ASSERT_FALSE(source.ok()) << threads;
    EXPECT_EQ(source.status().code(), StatusCode::kInvalidArgument);
  }
}

TEST_P(LocalFileTest, InvalidOptionsThroughOpenFile) {
  std::string path = WriteFile("o.bin", 10);
  auto reader = Reader::OpenFile(path, LimitOptions(0));
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(reader.status().message(), HasSubstr("read-thread-num"));
}

TEST_P(LocalFileTest, ConcurrentReadsFromSharedLimiter) {
  constexpr size_t kSize = 64 * 1024;
  std::string p1 = WriteFile("a.bin", kSize), p2 = WriteFile("b.bin", kSize);
  auto limiter = Limiter::Make(LimitOptions(3));
  ASSERT_TRUE(limiter.ok());
  auto s1 = OpenLocalFile(p1, FileOptions(3));
  auto s2 = OpenLocalFile(p2, FileOptions(3));
  ASSERT_TRUE(s1.ok() && s2.ok());
  auto r1 = Reader::Open(*s1, {}, *limiter);
  auto r2 = Reader::Open(*s2, {}, *limiter);
  ASSERT_TRUE(r1.ok() && r2.ok());
  const auto ranges = testing::SpreadRanges(200, 300, 320);
  auto st1 = r1->ReadRanges(ranges, Delivery::kAsCompleted);
  auto st2 = r2->ReadRanges(ranges, Delivery::kOrdered);
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
  Stats s = (*limiter)->GetStats();
  EXPECT_LE(s.peak_in_flight, 3u);
  EXPECT_LE(s.peak_retained_count, 6u);
  EXPECT_EQ(s.ranges_delivered, 400u);
}

}  // namespace
}  // namespace rangeio
