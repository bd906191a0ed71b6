// Options: defaults, Validate, Parse from key/value pairs, ToString.
#include "rangeio/options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "rangeio/limiter.h"

namespace rangeio {
namespace {

using std::chrono::milliseconds;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

TEST(OptionsTest, Defaults) {
  Options o;
  EXPECT_EQ(o.limiter.io_concurrency, 64u);
  EXPECT_EQ(o.limiter.response_budget_count, 0u);
  EXPECT_EQ(o.limiter.EffectiveResponseBudgetCount(), 128u);
  EXPECT_EQ(o.limiter.response_budget_bytes, 64ull << 20);
  EXPECT_EQ(o.reader.response_stall_timeout, milliseconds(10'000));
  EXPECT_TRUE(o.Validate().ok()) << o.Validate().ToString();
}

TEST(OptionsTest, EffectiveResponseBudgetCount) {
  Options o;
  o.limiter.io_concurrency = 3;
  EXPECT_EQ(o.limiter.EffectiveResponseBudgetCount(), 6u);
  o.limiter.response_budget_count = 5;
  EXPECT_EQ(o.limiter.EffectiveResponseBudgetCount(), 5u);
}

// Sets one field through `mutate`, expects Validate to accept or reject it;
// a rejection must name the key.
void ExpectValid(void (*mutate)(Options&), bool valid, const char* key) {
  Options o;
  mutate(o);
  Status s = o.Validate();
  if (valid) {
    EXPECT_TRUE(s.ok()) << key << ": " << s.ToString();
  } else {
    ASSERT_FALSE(s.ok()) << key << " should be rejected";
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr(key));
  }
}

TEST(OptionsTest, ValidateBounds) {
  ExpectValid([](Options& o) { o.limiter.io_concurrency = 0; }, false,
              "io-concurrency");
  ExpectValid([](Options& o) { o.limiter.io_concurrency = 1; }, true,
              "io-concurrency");
  ExpectValid([](Options& o) { o.limiter.io_concurrency = 4096; }, true,
              "io-concurrency");
  ExpectValid([](Options& o) { o.limiter.io_concurrency = 4097; }, false,
              "io-concurrency");

  ExpectValid([](Options& o) { o.limiter.response_budget_count = 1'048'576; },
              true, "response-budget-count");
  ExpectValid([](Options& o) { o.limiter.response_budget_count = 1'048'577; },
              false, "response-budget-count");

  ExpectValid([](Options& o) { o.limiter.response_budget_bytes = 0; }, false,
              "response-budget-bytes");
  ExpectValid([](Options& o) { o.limiter.response_budget_bytes = 1; }, true,
              "response-budget-bytes");
  ExpectValid([](Options& o) { o.limiter.response_budget_bytes = 1ull << 40; },
              true, "response-budget-bytes");
  ExpectValid(
      [](Options& o) { o.limiter.response_budget_bytes = (1ull << 40) + 1; },
      false, "response-budget-bytes");

  ExpectValid(
      [](Options& o) { o.reader.response_stall_timeout = milliseconds(0); },
      false, "response-stall-timeout-ms");
  ExpectValid(
      [](Options& o) { o.reader.response_stall_timeout = milliseconds(-5); },
      false, "response-stall-timeout-ms");
  ExpectValid(
      [](Options& o) { o.reader.response_stall_timeout = milliseconds(1); },
      true, "response-stall-timeout-ms");
  ExpectValid(
      [](Options& o) {
        o.reader.response_stall_timeout = milliseconds(86'400'000);
      },
      true, "response-stall-timeout-ms");
  ExpectValid(
      [](Options& o) {
        o.reader.response_stall_timeout = milliseconds(86'400'001);
      },
      false, "response-stall-timeout-ms");
}

TEST(OptionsTest, ValidateNamesValidRange) {
  Options o;
  o.limiter.io_concurrency = 0;
  Status s = o.Validate();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), AllOf(HasSubstr("1"), HasSubstr("4096")));
}

TEST(OptionsTest, ParseMapSetsEveryKey) {
  auto o = Options::Parse(std::map<std::string, std::string>{
      {"read-thread-num", "8"},
      {"response-budget-count", "24"},
      {"response-budget-bytes", "1048576"},
      {"response-stall-timeout-ms", "250"},
  });
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->limiter.io_concurrency, 8u);
  EXPECT_EQ(o->limiter.response_budget_count, 24u);
  EXPECT_EQ(o->limiter.response_budget_bytes, 1048576u);
  EXPECT_EQ(o->reader.response_stall_timeout, milliseconds(250));
}

// "io-concurrency" is the name, "read-thread-num" (Paimon's) its alias:
// either sets the field, both at once is refused, and an error names the
// key the caller wrote.
TEST(OptionsTest, IoConcurrencyTakesItsNameOrItsAlias) {
  for (const char* key : {"io-concurrency", "read-thread-num"}) {
    auto o = Options::Parse(std::map<std::string, std::string>{{key, "9"}});
    ASSERT_TRUE(o.ok()) << key << ": " << o.status().ToString();
    EXPECT_EQ(o->limiter.io_concurrency, 9u);
    EXPECT_TRUE(Options::IsKey(key));
    auto bad = Options::Parse(std::map<std::string, std::string>{{key, "0"}});
    ASSERT_FALSE(bad.ok());
    EXPECT_THAT(bad.status().message(), HasSubstr(std::string(key) + "='0'"));
  }
  auto both = Options::Parse("io-concurrency=4,read-thread-num=4");
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(both.status().message(), HasSubstr("given twice"));
}

// The limiter's hedge reserve: automatic (ceil(C x hedge-budget), at least
// 1) unless hedge-reserve sets it.
TEST(OptionsTest, HedgeReserveIsAutomaticUnlessSet) {
  auto o = Options::Parse("io-concurrency=40,hedge-budget=0.1");
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->ResolvedLimiter().hedge_reserve, 4u);
  auto set = Options::Parse("io-concurrency=40,hedge-reserve=9");
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(set->ResolvedLimiter().hedge_reserve, 9u);
  auto limiter = Limiter::Make(*set);
  ASSERT_TRUE(limiter.ok());
  EXPECT_EQ((*limiter)->hedge_reserve(), 9u);
  auto bad = Options::Parse("hedge-reserve=5000");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("hedge-reserve"));
}

TEST(OptionsTest, ParseEmptyGivesDefaults) {
  auto m = Options::Parse(std::map<std::string, std::string>{});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->limiter.io_concurrency, LimiterOptions::kDefaultIoConcurrency);
  auto s = Options::Parse(std::string_view(""));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->limiter.response_budget_bytes,
            LimiterOptions::kDefaultResponseBudgetBytes);
}

TEST(OptionsTest, ParseUntouchedKeysKeepDefaults) {
  auto o = Options::Parse(
      std::map<std::string, std::string>{{"read-thread-num", "3"}});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->limiter.io_concurrency, 3u);
  EXPECT_EQ(o->limiter.response_budget_count, 0u);
  EXPECT_EQ(o->limiter.EffectiveResponseBudgetCount(), 6u);
}

TEST(OptionsTest, ParseByteSuffixes) {
  struct Case {
    const char* text;
    uint64_t want;
  };
  for (const Case& c : {Case{"64MiB", 64ull << 20}, Case{"1KiB", 1024},
                        Case{"3GiB", 3ull << 30}, Case{"4096", 4096},
                        Case{"1024GiB", 1ull << 40}, Case{"1TiB", 1ull << 40},
                        Case{"1T", 1ull << 40}}) {
    auto o = Options::Parse(
        std::map<std::string, std::string>{{"response-budget-bytes", c.text}});
    ASSERT_TRUE(o.ok()) << c.text << ": " << o.status().ToString();
    EXPECT_EQ(o->limiter.response_budget_bytes, c.want) << c.text;
  }
  // K / M / G: accepted, as binary or decimal multiples.
  for (auto [text, bin, dec] :
       {std::tuple<const char*, uint64_t, uint64_t>{"2K", 2048, 2000},
        {"2M", 2ull << 20, 2'000'000},
        {"2G", 2ull << 30, 2'000'000'000}}) {
    auto o = Options::Parse(
        std::map<std::string, std::string>{{"response-budget-bytes", text}});
    ASSERT_TRUE(o.ok()) << text << ": " << o.status().ToString();
    EXPECT_TRUE(o->limiter.response_budget_bytes == bin ||
                o->limiter.response_budget_bytes == dec)
        << text << " -> " << o->limiter.response_budget_bytes;
  }
}

TEST(OptionsTest, ParseStringForm) {
  auto o = Options::Parse(
      std::string_view("read-thread-num=16,response-budget-bytes=8MiB,"
                       "response-stall-timeout-ms=500"));
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->limiter.io_concurrency, 16u);
  EXPECT_EQ(o->limiter.response_budget_bytes, 8ull << 20);
  EXPECT_EQ(o->reader.response_stall_timeout, milliseconds(500));
}

TEST(OptionsTest, ParseStringRejectsMalformedPair) {
  for (const char* text : {"read-thread-num", "read-thread-num=8,oops", "=8"}) {
    auto o = Options::Parse(std::string_view(text));
    EXPECT_FALSE(o.ok()) << "accepted '" << text << "'";
    if (!o.ok()) {
      EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument);
    }
  }
}

TEST(OptionsTest, ParseRejectsUnknownKey) {
  auto o = Options::Parse(
      std::map<std::string, std::string>{{"read-thread-nmu", "8"}});
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(o.status().message(), HasSubstr("read-thread-nmu"));
}

// The chunk-barrier baseline is a benchmark hook (src/stream/baselines.h),
// not an option: "scheduling" is an unknown key, whatever its value.
TEST(OptionsTest, SchedulingIsNotAnOption) {
  for (const char* value : {"rolling", "chunked", "barrier", ""}) {
    auto o = Options::Parse(
        std::map<std::string, std::string>{{"scheduling", value}});
    ASSERT_FALSE(o.ok()) << "scheduling=" << value << " accepted";
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(o.status().message(), HasSubstr("unknown option 'scheduling'"));
  }
  EXPECT_THAT(Options().ToString(), Not(HasSubstr("scheduling")));
}

// Every invalid value is rejected with a message naming key, value and the
// valid range.
TEST(OptionsTest, ParseRejectsInvalidValuesNamingKeyValueAndRange) {
  struct Case {
    const char* key;
    const char* value;
    std::vector<const char*> range_words;  // parts of the valid range
  };
  const Case cases[] = {
      {"read-thread-num", "0", {"1", "4096"}},
      {"read-thread-num", "4097", {"1", "4096"}},
      {"read-thread-num", "-1", {"1", "4096"}},
      {"read-thread-num", "abc", {"1", "4096"}},
      {"read-thread-num", "", {"1", "4096"}},
      {"read-thread-num", "8x", {"1", "4096"}},
      {"read-thread-num", "99999999999999999999", {"1", "4096"}},
      {"response-budget-count", "1048577", {"1048576"}},
      {"response-budget-count", "many", {"1048576"}},
      {"response-budget-bytes", "0", {}},
      {"response-budget-bytes", "1025GiB", {}},
      {"response-budget-bytes", "2TiB", {}},
      {"response-budget-bytes", "64XB", {}},
      {"response-budget-bytes", "-64MiB", {}},
      {"response-stall-timeout-ms", "0", {"86400000"}},
      {"response-stall-timeout-ms", "86400001", {"86400000"}},
      {"response-stall-timeout-ms", "soon", {"86400000"}},
  };
  for (const Case& c : cases) {
    auto o =
        Options::Parse(std::map<std::string, std::string>{{c.key, c.value}});
    ASSERT_FALSE(o.ok()) << c.key << "=" << c.value << " accepted";
    EXPECT_EQ(o.status().code(), StatusCode::kInvalidArgument);
    const std::string& m = o.status().message();
    EXPECT_THAT(m, HasSubstr(c.key));
    if (*c.value != '\0') {
      EXPECT_THAT(m, HasSubstr(c.value)) << c.key << ": quote the value given";
    }
    for (const char* w : c.range_words) {
      EXPECT_THAT(m, HasSubstr(w)) << c.key << "=" << c.value;
    }
  }
}

TEST(OptionsTest, ToStringRoundTrips) {
  Options o;
  o.limiter.io_concurrency = 7;
  o.limiter.response_budget_count = 9;
  o.limiter.response_budget_bytes = 12345;
  o.reader.response_stall_timeout = milliseconds(77);
  std::string text = o.ToString();
  for (const char* key :
       {"io-concurrency", "hedge-reserve", "response-budget-count",
        "response-budget-bytes", "response-stall-timeout-ms"}) {
    EXPECT_THAT(text, HasSubstr(key));
  }
  auto back = Options::Parse(std::string_view(text));
  ASSERT_TRUE(back.ok()) << text << ": " << back.status().ToString();
  EXPECT_EQ(back->limiter.io_concurrency, 7u);
  EXPECT_EQ(back->limiter.response_budget_count, 9u);
  EXPECT_EQ(back->limiter.response_budget_bytes, 12345u);
  EXPECT_EQ(back->reader.response_stall_timeout, milliseconds(77));

  auto defaults = Options::Parse(std::string_view(Options().ToString()));
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(defaults->ToString(), Options().ToString());
}

// Found by options_fuzz: the none preset's unlimited ratio printed as "inf",
// which Parse refuses; a ratio lost digits. Every preset round-trips.
TEST(OptionsTest, EveryPlannerPresetAndRatioRoundTrips) {
  for (const char* text :
       {"planner=none", "planner=local", "planner=object-store",
        "planner=object-store,max-overread-ratio=1.1",
        "planner=local,max-overread-ratio=1.2345678901234"}) {
    auto o = Options::Parse(std::string_view(text));
    ASSERT_TRUE(o.ok()) << text << ": " << o.status().ToString();
    auto back = Options::Parse(std::string_view(o->ToString()));
    ASSERT_TRUE(back.ok()) << o->ToString() << ": " << back.status().ToString();
    EXPECT_EQ(back->ToString(), o->ToString());
    EXPECT_EQ(back->reader.planner->max_overread_ratio,
              o->reader.planner->max_overread_ratio);
  }
}

}  // namespace
}  // namespace rangeio
