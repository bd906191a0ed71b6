// ByteRange: overflow-safe construction, parsing, bounds checks, naming.
#include "rangeio/byte_range.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace rangeio {
namespace {

using ::testing::HasSubstr;

TEST(ByteRangeTest, MakeAcceptsValidRanges) {
  auto r = ByteRange::Make(10, 20);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->offset, 10u);
  EXPECT_EQ(r->length, 20u);
  EXPECT_EQ(r->end(), 30u);
  EXPECT_FALSE(r->empty());

  auto edge = ByteRange::Make(UINT64_MAX - 5, 5);
  ASSERT_TRUE(edge.ok());
  EXPECT_EQ(edge->end(), UINT64_MAX);

  auto empty_at_max = ByteRange::Make(UINT64_MAX, 0);
  ASSERT_TRUE(empty_at_max.ok());
  EXPECT_TRUE(empty_at_max->empty());
}

TEST(ByteRangeTest, MakeRejectsOverflow) {
  for (auto [off, len] : {std::pair<uint64_t, uint64_t>{UINT64_MAX, 1},
                          {UINT64_MAX - 5, 6},
                          {1, UINT64_MAX},
                          {UINT64_MAX, UINT64_MAX}}) {
    auto r = ByteRange::Make(off, len);
    ASSERT_FALSE(r.ok()) << off << "+" << len;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr(std::to_string(off)));
  }
}

TEST(ByteRangeTest, ToStringIsHalfOpen) {
  EXPECT_EQ((ByteRange{10, 20}).ToString(), "[10, 30)");
  EXPECT_EQ((ByteRange{0, 0}).ToString(), "[0, 0)");
  EXPECT_EQ((ByteRange{UINT64_MAX - 1, 1}).ToString(),
            "[18446744073709551614, 18446744073709551615)");
}

TEST(ByteRangeTest, Equality) {
  EXPECT_EQ((ByteRange{1, 2}), (ByteRange{1, 2}));
  EXPECT_NE((ByteRange{1, 2}), (ByteRange{1, 3}));
  EXPECT_NE((ByteRange{1, 2}), (ByteRange{2, 2}));
}

TEST(ByteRangeTest, ParseAcceptsOffsetColonLength) {
  auto r = ByteRange::Parse("4096:512");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (ByteRange{4096, 512}));

  auto zero = ByteRange::Parse("0:0");
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(*zero, (ByteRange{0, 0}));

  auto big = ByteRange::Parse("18446744073709551614:1");
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->end(), UINT64_MAX);
}

TEST(ByteRangeTest, ParseRejectsGarbage) {
  for (const char* text :
       {"", ":", "10", "10:", ":10", "a:b", "10:x", "x:10", "10:20:30", "-1:5",
        "5:-1", "10:20x", "0x10:4", "1.5:2", "10;20", "99999999999999999999:1",
        "1:99999999999999999999"}) {
    auto r = ByteRange::Parse(text);
    EXPECT_FALSE(r.ok()) << "accepted '" << text << "'";
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << text;
      if (*text != '\0') {
        EXPECT_THAT(r.status().message(), HasSubstr(text))
            << "the error should quote the bad text";
      }
    }
  }
}

TEST(ByteRangeTest, ParseRejectsEndOverflow) {
  auto r = ByteRange::Parse("18446744073709551615:1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST(ByteRangeTest, CheckWithin) {
  EXPECT_TRUE((ByteRange{90, 10}).CheckWithin(100, "f").ok());
  EXPECT_TRUE((ByteRange{0, 100}).CheckWithin(100, "f").ok());
  EXPECT_TRUE((ByteRange{100, 0}).CheckWithin(100, "f").ok());
  EXPECT_TRUE((ByteRange{0, 0}).CheckWithin(0, "f").ok());

  Status past = (ByteRange{90, 11}).CheckWithin(100, "data/part-0.bin");
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.code(), StatusCode::kOutOfRange);
  EXPECT_THAT(past.message(), HasSubstr("data/part-0.bin"));
  EXPECT_THAT(past.message(), HasSubstr("[90, 101)"));
  EXPECT_THAT(past.message(), HasSubstr("100")) << "should state the size";

  Status empty_past = (ByteRange{101, 0}).CheckWithin(100, "f");
  EXPECT_EQ(empty_past.code(), StatusCode::kOutOfRange);

  Status empty_source = (ByteRange{0, 1}).CheckWithin(0, "f");
  EXPECT_EQ(empty_source.code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace rangeio
