// OpenIvfIndex: files it must refuse (not FAISS, not IVF, truncated, empty,
// hostile counts, list tables that do not match the data) are refused
// before anything is allocated from them, with an error naming the URL and
// what is wrong; the header is read within any response budget.
#include <faiss/IndexFlat.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/index_io.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "rangeio_faiss/range_inverted_lists.h"
#include "support/test_util.h"
#include "test_index.h"

namespace rangeio::integrations {
namespace {

using rangeio::testing::Build;
using rangeio::testing::Data;
using rangeio::testing::ExpectSameLabels;
using rangeio::testing::FindFourcc;
using rangeio::testing::GetU64;
using rangeio::testing::kDim;
using rangeio::testing::PutU64;
using rangeio::testing::ReadBytes;
using rangeio::testing::SaveOnDisk;
using rangeio::testing::ScratchDir;
using rangeio::testing::WriteBytes;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(OpenIvfIndexTest, RejectsFilesItDoesNotUnderstand) {
  ScratchDir dir;
  {
    const std::string junk = dir.WriteFile("junk.index", 4096);
    auto r = OpenIvfIndex(junk);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.status().ToString(), HasSubstr("not a FAISS index"));
    EXPECT_THAT(r.status().ToString(), HasSubstr("junk.index"));
  }
  {
    const std::string flat = dir.path() + "/flat.index";
    faiss::IndexFlatL2 index(kDim);
    index.add(100, Data().base.data());
    faiss::write_index(&index, flat.c_str());
    auto r = OpenIvfIndex(flat);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.status().ToString(), HasSubstr("not an IVF one"));
    std::filesystem::remove(flat);
  }
  {
    const std::string path = dir.path() + "/cut.index";
    Build("flat", path);
    std::filesystem::resize_file(path,
                                 std::filesystem::file_size(path) * 3 / 5);
    auto r = OpenIvfIndex(path);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.status().ToString(), HasSubstr("does not fit in the data"));
    EXPECT_THAT(r.status().ToString(), HasSubstr("cut.index"));
    std::filesystem::remove(path);
  }
  {
    auto r = OpenIvfIndex(dir.path() + "/missing.index");
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.status().ToString(), HasSubstr("missing.index"));
  }
}

// An empty file, and a file that ends inside FAISS's header, are refused
// as such, naming the URL (not with FAISS's stale errno text).
TEST(OpenIvfIndexTest, EmptyOrCutHeaderIsRefusedClearly) {
  ScratchDir dir;
  const std::string empty = dir.WriteFile("empty.index", 0);
  auto r = OpenIvfIndex(empty);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().ToString(), HasSubstr("empty.index"));
  EXPECT_THAT(r.status().ToString(), HasSubstr("empty"));
  EXPECT_THAT(r.status().ToString(), HasSubstr("not a FAISS IVF index"));
  EXPECT_THAT(r.status().ToString(), Not(HasSubstr("No such file")));

  const std::string cut = dir.path() + "/cut-header.index";
  Build("flat", cut);
  std::filesystem::resize_file(cut, 30);  // inside the index header
  r = OpenIvfIndex(cut);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().ToString(), HasSubstr("cut-header.index"));
  EXPECT_THAT(r.status().ToString(), HasSubstr("ends at byte 30"));
  EXPECT_THAT(r.status().ToString(), Not(HasSubstr("No such file")));
}

// An index of 600 lists: its quantizer (600 x 32 floats, 75 KiB) is more
// than one 64 KiB header window.
std::unique_ptr<faiss::IndexIVF> BuildManyLists(const std::string& path) {
  auto* quantizer = new faiss::IndexFlatL2(kDim);
  auto ivf = std::make_unique<faiss::IndexIVFFlat>(quantizer, kDim, 600);
  ivf->own_fields = true;
  ivf->cp.niter = 4;
  ivf->cp.min_points_per_centroid = 1;  // a test index: no warning
  ivf->train(rangeio::testing::kBase, Data().base.data());
  ivf->add(rangeio::testing::kBase, Data().base.data());
  faiss::write_index(ivf.get(), path.c_str());
  return ivf;
}

// The header is read within any response budget the options accept, one
// window at a time: a budget of one window (64 KiB) or less opens, with
// one result retained at a time or more, and the windows stay within the
// budget (4 KiB at least: a larger read is admitted alone).
TEST(OpenIvfIndexTest, HeaderIsReadWithinAnyResponseBudget) {
  ScratchDir dir;
  const std::string path = dir.path() + "/many.index";
  auto memory = BuildManyLists(path);
  for (const uint64_t budget :
       {uint64_t{64} << 10, uint64_t{4} << 10, uint64_t{1000}, uint64_t{1}}) {
    for (const uint32_t count : {0u, 1u}) {
      SCOPED_TRACE("budget " + std::to_string(budget) + " bytes, count " +
                   std::to_string(count));
      IvfOpenOptions o;
      o.reader.limiter.response_budget_bytes = budget;
      o.reader.limiter.response_budget_count = count;
      auto ranged = OpenIvfIndex(path, o);
      ASSERT_TRUE(ranged.ok()) << ranged.status().ToString();
      const Stats s =
          RangeListsOf(ranged->get())->reader().limiter()->GetStats();
      EXPECT_LE(s.peak_retained_bytes, std::max<uint64_t>(budget, 4096));
      EXPECT_LE(s.peak_retained_count, 1u);
      if (budget == (64 << 10) && count == 0) {
        ExpectSameLabels(*memory, **ranged);
      }
    }
  }
}

// In a child process: limits the address space to 1 GiB more than it
// has, opens `path` and prints the error; exit code 0 for an
// InvalidArgument naming the file. FAISS would otherwise allocate GiBs
// from the hostile count (and fail with bad_alloc under the limit).
int OpenWithinMemory(const std::string& path) {
  std::ifstream status("/proc/self/status");
  uint64_t vm_kib = 0;
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmSize:", 0) == 0) vm_kib = std::stoull(line.substr(7));
  }
  rlimit limit{};
  limit.rlim_cur = (vm_kib << 10) + (uint64_t{1} << 30);
  limit.rlim_max = limit.rlim_cur;
  if (setrlimit(RLIMIT_AS, &limit) != 0) return 2;
  auto r = OpenIvfIndex(path);
  const std::string msg = r.status().ToString();
  std::cerr << msg << "\n";
  const bool named =
      msg.find(std::filesystem::path(path).filename().string()) !=
      std::string::npos;
  return !r.ok() && named && r.status().code() == StatusCode::kInvalidArgument
             ? 0
             : 1;
}

// Expects `path` refused within that memory, the error matching `field`.
void ExpectRefusedWithinMemory(const std::string& path,
                               const std::string& field) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::_Exit(OpenWithinMemory(path)), ::testing::ExitedWithCode(0),
              field);
}

// A small saved index whose list count, or the count of a vector of its
// list table, is patched to 2^28 or 2^31 is refused before FAISS sizes
// anything from it.
TEST(OpenIvfIndexTest, HostileCountsAreRefusedBeforeAllocation) {
  ScratchDir dir;
  const std::string plain = dir.path() + "/small.index";
  Build("flat", plain, 40);
  const std::vector<char> ilar = ReadBytes(plain);
  ASSERT_LT(ilar.size(), 8u << 10);
  const size_t at = FindFourcc(ilar, "ilar") + 4;  // nlist, code_size, ...
  ASSERT_EQ(GetU64(ilar, at), uint64_t{rangeio::testing::kLists});
  ASSERT_EQ(std::string(ilar.data() + at + 16, 4), "full");
  const std::string hostile = dir.path() + "/hostile.index";
  for (const uint64_t count : {uint64_t{1} << 28, uint64_t{1} << 31}) {
    SCOPED_TRACE("count " + std::to_string(count));
    std::vector<char> bytes = ilar;
    PutU64(bytes, at, count);  // nlist
    WriteBytes(hostile, bytes);
    ExpectRefusedWithinMemory(hostile, "list count");
    bytes = ilar;
    PutU64(bytes, at + 20, count);  // the "full" sizes vector's length
    WriteBytes(hostile, bytes);
    ExpectRefusedWithinMemory(hostile, "list sizes. length");
  }
  // "ilod": nlist, code_size, then the {size, capacity, offset} table and
  // the slots table, each a count and its entries.
  const std::string ondisk = SaveOnDisk(plain, dir.path());
  const std::vector<char> ilod = ReadBytes(ondisk);
  const size_t od = FindFourcc(ilod, "ilod") + 4;
  const uint64_t nlist = GetU64(ilod, od);
  ASSERT_EQ(GetU64(ilod, od + 16), nlist);
  const size_t slots = od + 24 + nlist * 24;
  std::vector<char> bytes = ilod;
  PutU64(bytes, od + 16, uint64_t{1} << 28);
  WriteBytes(ondisk, bytes);
  ExpectRefusedWithinMemory(ondisk, "list table.s length");
  bytes = ilod;
  PutU64(bytes, slots, uint64_t{1} << 28);
  WriteBytes(ondisk, bytes);
  ExpectRefusedWithinMemory(ondisk, "slot table.s length");
}

// "ilar" list sizes that do not add up to the lists' data are refused: one
// size one smaller, the lists would end before the data does (and scans
// would take codes for ids).
TEST(OpenIvfIndexTest, ListSizesThatDoNotMatchTheDataAreRefused) {
  ScratchDir dir;
  const std::string plain = dir.path() + "/plain.index";
  Build("flat", plain);
  std::vector<char> bytes = ReadBytes(plain);
  const size_t sizes = FindFourcc(bytes, "ilar") + 4 + 8 + 8 + 4 + 8;
  ASSERT_GT(GetU64(bytes, sizes + 8 * 3), 0u);
  PutU64(bytes, sizes + 8 * 3, GetU64(bytes, sizes + 8 * 3) - 1);
  const std::string bad = dir.path() + "/bad-sizes.index";
  WriteBytes(bad, bytes);
  auto r = OpenIvfIndex(bad);
  ASSERT_FALSE(r.ok()) << "opened an index whose list sizes miss a vector";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().ToString(), HasSubstr("list sizes"));
  EXPECT_THAT(r.status().ToString(), HasSubstr("bad-sizes.index"));
}

// An "ilod" list whose capacity runs past the end of the .ivfdata file is
// refused: the list that ends last given one entry less than its capacity
// (as a list that lost a vector), and the data file cut by that entry's id.
TEST(OpenIvfIndexTest, ListCapacityPastTheDataIsRefused) {
  ScratchDir dir;
  const std::string plain = dir.path() + "/plain.index";
  Build("flat", plain);
  const std::string ondisk = SaveOnDisk(plain, dir.path());
  std::vector<char> bytes = ReadBytes(ondisk);
  const size_t od = FindFourcc(bytes, "ilod") + 4;
  const uint64_t code_size = GetU64(bytes, od + 8);
  size_t last = 0;  // the table entry {size, capacity, offset} ending last
  uint64_t end = 0;
  for (uint64_t i = 0; i < GetU64(bytes, od); ++i) {
    const size_t e = od + 24 + i * 24;
    const uint64_t list_end =
        GetU64(bytes, e + 16) + GetU64(bytes, e + 8) * (code_size + 8);
    if (list_end > end) std::tie(last, end) = std::tuple(e, list_end);
  }
  const std::string data = dir.path() + "/lists.ivfdata";
  ASSERT_EQ(std::filesystem::file_size(data), end);
  ASSERT_GT(GetU64(bytes, last), 0u);
  PutU64(bytes, last, GetU64(bytes, last) - 1);
  WriteBytes(ondisk, bytes);
  std::filesystem::resize_file(data, end - 8);
  auto r = OpenIvfIndex(ondisk);
  ASSERT_FALSE(r.ok()) << "opened lists whose capacity is past the data";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().ToString(), HasSubstr("capacity"));
  EXPECT_THAT(r.status().ToString(), HasSubstr("lists.ivfdata"));
}
}  // namespace
}  // namespace rangeio::integrations
