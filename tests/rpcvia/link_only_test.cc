// "via" with no source change (issue 19): programs built from rpcgen_via's output *without*
// RPCGEN_VIA_TRANSPORT and linked with librpcvia reach the via transport by the nettype string
// alone -- a server started with "-s via", and a client calling clnt_create(..., "via").
#include <cstdio>
#include <string>

#include <san/san.h>

#include "via_fixture.h"

namespace san::rpcvia_test {
namespace {

// Runs the link-only client and returns its output line ("shm 10"), or its error text.
std::string RunLinkOnlyClient() {
  const std::string command = "RPCVIA_FALLBACK=fail " + Bin("rpcvia_test_client_linked") + " 2>&1";
  std::string out;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[512];
    while (fgets(buf, sizeof buf, p) != nullptr) out += buf;
    pclose(p);
  }
  return out;
}

TEST_F(RpcviaTest, LinkingIsEnoughForAViaClient) {
  TestServer server("rpcvia_test_server", {"-s", "via"}, /*udp=*/false);
  EXPECT_EQ(RunLinkOnlyClient(), "shm 10\n");
}

TEST_F(RpcviaTest, LinkingIsEnoughForAViaServer) {
  TestServer server("rpcvia_test_server_linked", {"-s", "via"}, /*udp=*/false);
  CLIENT* c = Create("via");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(Mode(c), SAN_MODE_SHM);  // the server side is a SAN listener, not libtirpc's tcp
  clnt_destroy(c);
  EXPECT_EQ(RunLinkOnlyClient(), "shm 10\n");
}

}  // namespace
}  // namespace san::rpcvia_test
