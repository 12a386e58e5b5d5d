// Loopback fault injection: each FaultPlan entry happens exactly as specified. Suite names start
// with "fabric" so `ctest -R fabric` selects them.
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "fabric_test_util.h"
#include "sanlib/fabric/registry.h"
#include "support/loopback/loopback_endpoint.h"
#include "support/loopback/loopback_provider.h"

namespace san::fabric {
namespace {

using loopback::FaultPlan;
using loopback::LoopbackProvider;
using testing::ConnectPair;
using testing::OneSegment;
using testing::Pair;
using testing::PairOptions;
using testing::WaitCompletions;

// Client sends carry imm = 1, 2, 3...; returns what the server received.
std::vector<Completion> SendNumbered(Pair& pair, int count, std::vector<int>* errors) {
  for (int i = 1; i <= count; ++i) {
    errors->push_back(pair.client->PostSend(OneSegment(i, i, &i, sizeof(i))).code());
  }
  return WaitCompletions(pair.server.get(), 8, 200);
}

TEST(fabric_loopback, DropNthSend) {
  FaultPlan plan;
  plan.drop_send = 3;
  LoopbackProvider provider(plan);
  EXPECT_FALSE(provider.capabilities() & kCapReliable);
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(&provider, PairOptions(), &pair));
  std::vector<int> errors;
  auto got = SendNumbered(pair, 5, &errors);
  EXPECT_EQ(errors, std::vector<int>(5, 0));
  ASSERT_EQ(got.size(), 4u);
  const uint32_t expect[] = {1, 2, 4, 5};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(got[i].imm, expect[i]);
    EXPECT_EQ(got[i].id, 2000u + i);  // the lost message consumed no receive
  }
  EXPECT_EQ(WaitCompletions(pair.client.get(), 5).size(), 5u);  // all sends "completed"
  EXPECT_FALSE(pair.server->broken());
}

TEST(fabric_loopback, FailNthPostSend) {
  FaultPlan plan;
  plan.fail_send = 2;
  plan.fail_error = ENOBUFS;
  LoopbackProvider provider(plan);
  EXPECT_TRUE(provider.capabilities() & kCapReliable);
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(&provider, PairOptions(), &pair));
  std::vector<int> errors;
  auto got = SendNumbered(pair, 3, &errors);
  EXPECT_EQ(errors, (std::vector<int>{0, ENOBUFS, 0}));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].imm, 1u);
  EXPECT_EQ(got[1].imm, 3u);
  auto sent = WaitCompletions(pair.client.get(), 8, 100);
  ASSERT_EQ(sent.size(), 2u);  // no completion for the failed post
  EXPECT_EQ(sent[0].id, 1u);
  EXPECT_EQ(sent[1].id, 3u);
}

TEST(fabric_loopback, BreakAtNthSend) {
  FaultPlan plan;
  plan.break_at_send = 2;
  LoopbackProvider provider(plan);
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(&provider, PairOptions(), &pair));
  std::vector<int> errors;
  auto got = SendNumbered(pair, 3, &errors);
  EXPECT_EQ(errors, (std::vector<int>{0, ECONNRESET, ECONNRESET}));
  ASSERT_EQ(got.size(), 8u);
  EXPECT_EQ(got[0].error, 0);  // delivered before the break
  EXPECT_EQ(got[0].imm, 1u);
  for (size_t i = 1; i < got.size(); ++i) EXPECT_EQ(got[i].error, ECONNRESET);
  EXPECT_TRUE(pair.client->broken());
  EXPECT_TRUE(pair.server->broken());
}

TEST(fabric_loopback, DelayByPolls) {
  FaultPlan plan;
  plan.delay_polls = 3;
  LoopbackProvider provider(plan);
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(&provider, PairOptions(), &pair));
  ASSERT_TRUE(pair.client->PostSend(OneSegment(1, 7, "late", 4)).ok());
  EXPECT_FALSE(pair.server->Arm());  // something is held: poll, do not sleep
  Completion c[4];
  for (int i = 0; i < 3; ++i) EXPECT_EQ(pair.server->Poll(c, 4), 0) << "poll " << i;
  ASSERT_EQ(pair.server->Poll(c, 4), 1);
  EXPECT_EQ(c[0].imm, 7u);
  EXPECT_EQ(0, std::memcmp(pair.server_buf.addr, "late", 4));
}

TEST(fabric_loopback, DelayByTimeKeepsOrder) {
  FaultPlan plan;
  plan.delay_us = 20000;
  LoopbackProvider provider(plan);
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(&provider, PairOptions(), &pair));
  const uint64_t t0 = NowNs();
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(pair.client->PostSend(OneSegment(i, i, &i, sizeof(i))).ok());
  }
  Completion c[8];
  EXPECT_EQ(pair.server->Poll(c, 8), 0);
  auto got = WaitCompletions(pair.server.get(), 5, 2000);
  EXPECT_GE(NowNs() - t0, 20'000'000ull);
  ASSERT_EQ(got.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(got[i].imm, uint32_t(i));
}

TEST(fabric_loopback, PerEndpointPlanOverridesProviderPlan) {
  LoopbackProvider provider;
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(&provider, PairOptions(), &pair));
  FaultPlan plan;
  plan.drop_send = 1;
  dynamic_cast<loopback::LoopbackEndpoint*>(pair.server.get())->set_fault_plan(plan);
  ASSERT_TRUE(pair.server->PostSend(OneSegment(1, 1, "a", 1)).ok());
  ASSERT_TRUE(pair.server->PostSend(OneSegment(2, 2, "b", 1)).ok());
  auto got = WaitCompletions(pair.client.get(), 8, 100);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].imm, 2u);
}

// The product's registry has shm (and verbs where built); the loopback provider is the tests' own.
TEST(fabric_registry, KnowsShmNotTheTestsLoopback) {
  Provider* shm = GetProvider("shm");
  ASSERT_NE(shm, nullptr);
  EXPECT_EQ(shm, GetProvider("shm"));
  EXPECT_STREQ(shm->name(), "shm");
  EXPECT_EQ(GetProvider("loopback"), nullptr);
  EXPECT_STREQ(loopback::SharedProvider()->name(), "loopback");
  EXPECT_EQ(GetProvider("verbs"), nullptr);
  EXPECT_EQ(GetProvider(""), nullptr);
}

// The Nth registration of application memory is refused (ENOMEM, as a pinned-memory limit
// would); the others work and count the bytes sent from them.
TEST(fabric_loopback, RefuseNthRegistration) {
  FaultPlan plan;
  plan.refuse_register = 2;
  LoopbackProvider provider(plan);
  EXPECT_TRUE(provider.capabilities() & kCapRegisteredSend);
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(&provider, PairOptions(), &pair));
  std::vector<char> app(3000, 'z');
  auto first = pair.client->RegisterSendMemory(app.data(), app.size());
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(pair.client->RegisterSendMemory(app.data(), 100).status().code(), ENOMEM);
  auto third = pair.client->RegisterSendMemory(app.data() + 100, 100);
  ASSERT_TRUE(third.ok());
  ASSERT_TRUE(pair.client->PostSend(OneSegment(1, 1, app.data(), 3000)).ok());
  auto* client = static_cast<loopback::LoopbackEndpoint*>(pair.client.get());
  EXPECT_EQ(client->in_place_bytes(), 3000u);
  EXPECT_EQ(client->registered_regions(), 2);
  EXPECT_TRUE(pair.client->DeregisterSendMemory(first.value()).ok());
  EXPECT_TRUE(pair.client->DeregisterSendMemory(third.value()).ok());
  EXPECT_EQ(client->registered_regions(), 0);
  auto got = WaitCompletions(pair.server.get(), 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].length, 3000u);
}

TEST(fabric_loopback, NoRegisteredSend) {
  FaultPlan plan;
  plan.no_registered_send = true;
  LoopbackProvider provider(plan);
  EXPECT_FALSE(provider.capabilities() & kCapRegisteredSend);
  Pair pair;
  ASSERT_NO_FATAL_FAILURE(ConnectPair(&provider, PairOptions(), &pair));
  char buf[16] = {};
  EXPECT_EQ(pair.client->RegisterSendMemory(buf, sizeof buf).status().code(), ENOTSUP);
}

}  // namespace
}  // namespace san::fabric
