// local_read.h: how one read call's result advances a read, for every local
// engine. Errors the kernel rarely gives on demand (EIO, ...) are fed in
// here directly; each must name the file, the offset and length asked for,
// and the cause.
#include "local/local_read.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>

namespace rangeio::detail {
namespace {

using ::testing::HasSubstr;

// A handle that is never read through (fd -1 is never closed twice: the
// destructor's close(-1) fails harmlessly).
std::shared_ptr<FileHandle> Handle(bool direct, uint32_t align = 512) {
  return std::make_shared<FileHandle>(-1, "/data/f.bin", 1 << 20, direct,
                                      direct ? align : 1, direct ? align : 1);
}

TEST(LocalReadTest, BufferedReadAsksForExactlyTheRange) {
  auto f = Handle(false);
  LocalRead r = StartLocalRead(*f, {1001, 3000}, nullptr, 7);
  EXPECT_EQ(r.start, 1001u);
  EXPECT_EQ(r.want, 3000u);
  EXPECT_EQ(r.need(), 3000u);
  EXPECT_EQ(r.tag, 7u);
  EXPECT_NE(r.dst, nullptr);
}

TEST(LocalReadTest, DirectReadIsWidenedToAlignedBoundsAndAlignedMemory) {
  for (uint32_t align : {512u, 4096u}) {
    SCOPED_TRACE(align);
    auto f = Handle(true, align);
    LocalRead r = StartLocalRead(*f, {1001, 3000}, nullptr, 0);
    EXPECT_EQ(r.start % align, 0u);
    EXPECT_LE(r.start, 1001u);
    EXPECT_EQ((r.start + r.want) % align, 0u);
    EXPECT_GE(r.start + r.want, 4001u);
    EXPECT_LT(r.start + r.want, 4001u + align);
    EXPECT_EQ(r.need(), 4001u - r.start);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(r.dst) % align, 0u);
    LocalRead aligned = StartLocalRead(*f, {align, align}, nullptr, 0);
    EXPECT_EQ(aligned.start, align);
    EXPECT_EQ(aligned.want, align);
  }
}

TEST(LocalReadTest, ShortReadsAndRetriesAskForTheRest) {
  auto f = Handle(false);
  LocalRead r = StartLocalRead(*f, {100, 1000}, nullptr, 0);
  Status error;
  EXPECT_EQ(Advance(*f, r, 300, "pread", &error), ReadStep::kMore);
  EXPECT_EQ(r.next_offset(), 400u);
  EXPECT_EQ(r.remaining(), 700u);
  EXPECT_EQ(Advance(*f, r, -EAGAIN, "pread", &error), ReadStep::kMore);
  EXPECT_EQ(Advance(*f, r, -EINTR, "pread", &error), ReadStep::kMore);
  EXPECT_EQ(r.next_offset(), 400u);
  EXPECT_EQ(Advance(*f, r, 700, "pread", &error), ReadStep::kDone);
  EXPECT_TRUE(error.ok());
}

TEST(LocalReadTest, ErrnoNamesFileOffsetLengthAndCause) {
  for (bool direct : {false, true}) {
    auto f = Handle(direct);
    LocalRead r = StartLocalRead(*f, {4096, 4096}, nullptr, 0);
    Status error;
    ASSERT_EQ(Advance(*f, r, 1024, "io_uring read", &error), ReadStep::kMore);
    ASSERT_EQ(Advance(*f, r, -EIO, "io_uring read", &error), ReadStep::kFailed);
    EXPECT_EQ(error.code(), StatusCode::kIoError);
    EXPECT_THAT(error.message(), HasSubstr("io_uring read of '/data/f.bin'"));
    EXPECT_THAT(error.message(), HasSubstr("at offset 5120, 3072 bytes"));
    EXPECT_THAT(error.message(), HasSubstr("Input/output error (errno 5)"));
    EXPECT_EQ(error.message().find("O_DIRECT") != std::string::npos, direct);
  }
}

TEST(LocalReadTest, EndOfFileBeforeTheRangeEndsIsTruncation) {
  auto f = Handle(false);
  LocalRead r = StartLocalRead(*f, {0, 1000}, nullptr, 0);
  Status error;
  ASSERT_EQ(Advance(*f, r, 600, "pread", &error), ReadStep::kMore);
  ASSERT_EQ(Advance(*f, r, 0, "pread", &error), ReadStep::kFailed);
  EXPECT_EQ(error.code(), StatusCode::kIoError);
  EXPECT_THAT(error.message(),
              HasSubstr("'/data/f.bin' ended at offset 600 before the range "
                        "did (file truncated?)"));
}

TEST(LocalReadTest, DirectReadMayEndPastTheEndOfFileButNotBeforeTheRange) {
  auto f = Handle(true, 512);
  // The range ends at 1000; the aligned read asks for [0, 1024).
  LocalRead tail = StartLocalRead(*f, {10, 990}, nullptr, 0);
  Status error;
  EXPECT_EQ(Advance(*f, tail, 1000, "pread", &error), ReadStep::kDone);
  // A read that stops inside a block met the end of the file.
  LocalRead cut = StartLocalRead(*f, {10, 2000}, nullptr, 0);
  ASSERT_EQ(Advance(*f, cut, 700, "pread", &error), ReadStep::kFailed);
  EXPECT_THAT(error.message(), HasSubstr("ended at offset 700"));
  // One that stops on a block boundary continues from there.
  LocalRead part = StartLocalRead(*f, {10, 2000}, nullptr, 0);
  EXPECT_EQ(Advance(*f, part, 1024, "pread", &error), ReadStep::kMore);
  EXPECT_EQ(part.next_offset(), 1024u);
}

}  // namespace
}  // namespace rangeio::detail
