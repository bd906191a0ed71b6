// OpenIvfIndex: files it must refuse (not FAISS, not IVF, truncated, empty,
// hostile counts, list tables that do not match the data) are refused
// before anything is allocated from them, with an error naming the URL and
// what is wrong; the header is read within any response budget.
#include <faiss/IndexFlat.h>
#include <faiss/index_io.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "rangeio_faiss/range_inverted_lists.h"
#include "support/test_util.h"
#include "test_index.h"

namespace rangeio::integrations {
namespace {

using rangeio::testing::Build;
using rangeio::testing::Data;
using rangeio::testing::kDim;
using rangeio::testing::ScratchDir;
using ::testing::HasSubstr;

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

}  // namespace
}  // namespace rangeio::integrations
