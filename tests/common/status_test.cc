#include "sanlib/common/status.h"

#include <gtest/gtest.h>

#include "sanlib/common/shared_mapping.h"

namespace san {
namespace {

TEST(StatusTest, CarriesCodeAndCall) {
  Status s(ECONNRESET, "recv");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ECONNRESET);
  EXPECT_EQ(s.ToString(), "recv: Connection reset by peer (ECONNRESET)");
  EXPECT_TRUE(Status(EAGAIN, "post").would_block());
  EXPECT_EQ(Status::Ok().ToString(), "ok");
}

TEST(StatusTest, ResultHoldsValueOrStatus) {
  Result<int> good(7);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good.value(), 7);
  Result<int> bad(Status(EINVAL, "parse"));
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), EINVAL);
}

TEST(SharedMappingTest, AttachChecksSizeAndSeals) {
  Result<SharedMapping> m = SharedMapping::Create("test", 10000);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->size() % 4096, 0u);
  static_cast<char*>(m->data())[5] = 'x';
  Result<SharedMapping> wrong = SharedMapping::Attach(UniqueFd(dup(m->fd())), 4096);
  EXPECT_EQ(wrong.status().code(), EINVAL);
  Result<SharedMapping> right = SharedMapping::Attach(UniqueFd(dup(m->fd())), m->size());
  ASSERT_TRUE(right.ok()) << right.status().ToString();
  EXPECT_EQ(static_cast<char*>(right->data())[5], 'x');
}

}  // namespace
}  // namespace san
