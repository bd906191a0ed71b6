// Status / Result: the error model every other API relies on.
#include "rangeio/status.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <set>
#include <string>

namespace rangeio {
namespace {

using ::testing::HasSubstr;

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(Status::OK(), s);
}

TEST(StatusTest, FactoriesSetCodeAndMessage) {
  struct Case {
    Status status;
    StatusCode code;
  };
  const Case cases[] = {
      {Status::InvalidArgument("m"), StatusCode::kInvalidArgument},
      {Status::OutOfRange("m"), StatusCode::kOutOfRange},
      {Status::NotFound("m"), StatusCode::kNotFound},
      {Status::PermissionDenied("m"), StatusCode::kPermissionDenied},
      {Status::IoError("m"), StatusCode::kIoError},
      {Status::Cancelled("m"), StatusCode::kCancelled},
      {Status::ResourceExhausted("m"), StatusCode::kResourceExhausted},
      {Status::Internal("m"), StatusCode::kInternal},
  };
  for (const Case& c : cases) {
    EXPECT_FALSE(c.status.ok());
    EXPECT_EQ(c.status.code(), c.code);
    EXPECT_EQ(c.status.message(), "m");
  }
}

TEST(StatusTest, CodeNamesAreDistinctAndNonEmpty) {
  EXPECT_EQ(StatusCodeName(StatusCode::kOutOfRange), "out of range");
  std::set<std::string> names;
  for (int c = static_cast<int>(StatusCode::kOk);
       c <= static_cast<int>(StatusCode::kInternal); ++c) {
    std::string name(StatusCodeName(static_cast<StatusCode>(c)));
    EXPECT_FALSE(name.empty()) << c;
    names.insert(name);
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(StatusCode::kInternal) + 1);
}

TEST(StatusTest, ToStringIsCodeNameThenMessage) {
  Status s = Status::OutOfRange("range [5, 10) past the end of f (size 7)");
  EXPECT_EQ(s.ToString(),
            "out of range: range [5, 10) past the end of f (size 7)");
}

TEST(StatusTest, WithContextPrefixesAndKeepsCode) {
  Status s = Status::IoError("EIO").WithContext("reading [0, 4) of f");
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_EQ(s.message(), "reading [0, 4) of f: EIO");
}

TEST(StatusTest, EqualityComparesCodeAndMessage) {
  EXPECT_EQ(Status::IoError("a"), Status::IoError("a"));
  EXPECT_FALSE(Status::IoError("a") == Status::IoError("b"));
  EXPECT_FALSE(Status::IoError("a") == Status::NotFound("a"));
}

TEST(StatusTest, FromErrnoMapsCodeAndKeepsContextAndText) {
  Status nf = Status::FromErrno(ENOENT, "open /no/such");
  EXPECT_EQ(nf.code(), StatusCode::kNotFound);
  EXPECT_THAT(nf.message(), HasSubstr("open /no/such"));
  EXPECT_THAT(nf.message(), HasSubstr(std::strerror(ENOENT)));

  EXPECT_EQ(Status::FromErrno(EACCES, "x").code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(Status::FromErrno(EPERM, "x").code(),
            StatusCode::kPermissionDenied);
  Status io = Status::FromErrno(EIO, "pread f");
  EXPECT_EQ(io.code(), StatusCode::kIoError);
  EXPECT_THAT(io.message(), HasSubstr(std::strerror(EIO)));
  EXPECT_FALSE(Status::FromErrno(EIO, "").ok());  // empty context
}

TEST(ResultTest, HoldsValue) {
  Result<int> r = 42;
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.status().ok());
  EXPECT_EQ(*r, 42);
  EXPECT_EQ(r.value(), 42);
}

TEST(ResultTest, HoldsError) {
  Result<int> r = Status::NotFound("gone");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "gone");
}

// The API promises no exceptions: reading the value of an error aborts with
// the status message instead of throwing std::bad_variant_access.
TEST(ResultDeathTest, ValueOfAnErrorAbortsWithTheMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Result<int> r = Status::NotFound("object s3://b/k is gone");
  EXPECT_DEATH((void)r.value(),
               "Result::value\\(\\) on an error: not found: object "
               "s3://b/k is gone");
  const Result<int>& cr = r;
  EXPECT_DEATH((void)*cr, "not found: object s3://b/k is gone");
  EXPECT_DEATH((void)std::move(r).value(), "not found");
  Result<std::string> s = Status::IoError("short read");
  EXPECT_DEATH((void)s->size(), "I/O error: short read");
}

TEST(ResultTest, OkStatusBecomesInternalError) {
  Result<int> r = Status::OK();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

TEST(ResultTest, MoveOnlyValue) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(**r, 7);
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 7);
}

TEST(ResultTest, ArrowAccess) {
  Result<std::string> r = std::string("abc");
  EXPECT_EQ(r->size(), 3u);
}

Status FailIfNegative(int x) {
  if (x < 0) return Status::InvalidArgument("negative");
  return Status::OK();
}

Status UsesReturnNotOk(int x, int* reached) {
  RANGEIO_RETURN_NOT_OK(FailIfNegative(x));
  *reached = 1;
  return Status::OK();
}

Result<int> Half(int x) {
  if (x % 2) return Status::InvalidArgument("odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  RANGEIO_ASSIGN_OR_RETURN(int h, Half(x));
  RANGEIO_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(StatusMacrosTest, ReturnNotOk) {
  int reached = 0;
  EXPECT_EQ(UsesReturnNotOk(-1, &reached).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reached, 0);
  EXPECT_TRUE(UsesReturnNotOk(1, &reached).ok());
  EXPECT_EQ(reached, 1);
}

TEST(StatusMacrosTest, AssignOrReturn) {
  Result<int> q = Quarter(12);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(*q, 3);
  Result<int> bad = Quarter(6);  // 6 -> 3 -> odd
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "odd");
}

}  // namespace
}  // namespace rangeio
