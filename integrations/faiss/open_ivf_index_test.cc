// OpenIvfIndex: files it must refuse (not FAISS, not IVF, truncated, empty,
// hostile counts, list tables that do not match the data) are refused
// before anything is allocated from them, with an error naming the URL and
// what is wrong; the header is read within any response budget.
#include <faiss/IndexFlat.h>
#include <faiss/IndexIVFFlat.h>
#include <faiss/index_io.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>

#include "rangeio_faiss/range_inverted_lists.h"
#include "support/test_util.h"
#include "test_index.h"

namespace rangeio::integrations {
namespace {

using rangeio::testing::Build;
using rangeio::testing::Data;
using rangeio::testing::ExpectSameLabels;
using rangeio::testing::kDim;
using rangeio::testing::ScratchDir;
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

}  // namespace
}  // namespace rangeio::integrations
