// SAN_PEER_USERS (common/peer_users.h): the syntax Parse accepts and refuses, and Allows against
// this machine's real password and group databases (root, daemon and nobody exist on every
// Debian system; nobody's group is nogroup).
#include "sanlib/common/peer_users.h"

#include <grp.h>
#include <pwd.h>

#include <gtest/gtest.h>

#include "sanlib/common/config.h"
#include "support/fake_getenv.h"

namespace san {
namespace {

uid_t UidOf(const char* name) {
  const passwd* pw = getpwnam(name);
  EXPECT_NE(pw, nullptr) << name;
  return pw ? pw->pw_uid : 0;
}

TEST(PeerUsers, DefaultAndAnyAllowEveryone) {
  EXPECT_TRUE(PeerUsers().allows_everyone());
  Result<PeerUsers> any = PeerUsers::Parse(" any ");
  ASSERT_TRUE(any.ok());
  EXPECT_TRUE(any->allows_everyone());
  EXPECT_TRUE(any->Allows(12345, 0));
}

TEST(PeerUsers, SameAllowsOnlyOurOwnUid) {
  Result<PeerUsers> same = PeerUsers::Parse("same");
  ASSERT_TRUE(same.ok());
  EXPECT_FALSE(same->allows_everyone());
  EXPECT_TRUE(same->Allows(1000, 1000));
  EXPECT_FALSE(same->Allows(0, 1000));  // not even root
  EXPECT_FALSE(same->Allows(1001, 1000));
  EXPECT_EQ(same->text(), "same");
}

TEST(PeerUsers, ListsOfUidsNamesAndGroups) {
  const uid_t daemon_uid = UidOf("daemon"), nobody = UidOf("nobody");
  Result<PeerUsers> p = PeerUsers::Parse("1234, daemon");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->Allows(1234, 0));
  EXPECT_TRUE(p->Allows(daemon_uid, 0));
  EXPECT_TRUE(p->Allows(0, 0));  // our own, always
  EXPECT_FALSE(p->Allows(nobody, 0));

  // nobody's primary group is nogroup, by name and by number.
  const group* nogroup = getgrnam("nogroup");
  ASSERT_NE(nogroup, nullptr);
  Result<PeerUsers> g = PeerUsers::Parse("@nogroup");
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g->Allows(nobody, 0));
  EXPECT_FALSE(g->Allows(daemon_uid, 0));
  Result<PeerUsers> gid = PeerUsers::Parse("same,@" + std::to_string(nogroup->gr_gid));
  ASSERT_TRUE(gid.ok());
  EXPECT_TRUE(gid->Allows(nobody, 0));
  EXPECT_FALSE(gid->Allows(daemon_uid, 0));

  // A name nobody has, and a uid no passwd entry names: refused, not an error.
  Result<PeerUsers> ghost = PeerUsers::Parse("no-such-user-here,@no-such-group-here");
  ASSERT_TRUE(ghost.ok());
  EXPECT_FALSE(ghost->Allows(nobody, 0));
  EXPECT_FALSE(ghost->Allows(54321, 0));
}

TEST(PeerUsers, MalformedPoliciesAreRefused) {
  for (const char* bad :
       {"", " ", ",", "daemon,", ",daemon", "daemon,,nobody", "@", "any,daemon", "-rf", "a b",
        "da;mon", "4294967295", "99999999999", "@@x", "$x", "nobody$x", "-1", "+5"}) {
    EXPECT_FALSE(PeerUsers::Parse(bad).ok()) << "'" << bad << "'";
  }
  for (const char* good : {"0", "same,0", "www-data", "user.name", "machine$", "@_ssh", "a_b-c"}) {
    EXPECT_TRUE(PeerUsers::Parse(good).ok()) << "'" << good << "'";
  }
}

TEST(PeerUsers, ConfigKeepsOnlyAValidPolicy) {
  using testing_support::FakeEnvironment;
  using testing_support::FakeGetenv;
  std::vector<std::string> errors;
  const FakeEnvironment same{{"SAN_PEER_USERS", "same"}};
  testing_support::UseFakeEnvironment(same);
  EXPECT_EQ(Config::Parse(FakeGetenv, &errors).peer_users.text(), "same");
  EXPECT_TRUE(errors.empty());
  const FakeEnvironment bad{{"SAN_PEER_USERS", "daemon,,x"}};
  testing_support::UseFakeEnvironment(bad);
  EXPECT_EQ(Config::Parse(FakeGetenv, &errors).peer_users.text(), "any");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("SAN_PEER_USERS"), std::string::npos) << errors[0];
  const FakeEnvironment none;
  testing_support::UseFakeEnvironment(none);
}

}  // namespace
}  // namespace san
