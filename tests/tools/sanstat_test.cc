// sanstat against a live process: this test process holds a shm connection and a TCP-fallback
// connection, runs the real sanstat binary, and checks what it lists. Also: the report parser
// against malformed text (it comes from another process).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "support/inet.h"

#include "san/san.h"
#include "sanlib/tools/stat_report.h"

namespace {

using san::testing_support::Loopback;
using san::testing_support::PortOf;

std::string Capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

TEST(Sanstat, ListsShmAndFallbackSocketsOfALiveProcess) {
  // A SAN listener with a SAN client (shm), and a SAN client to a plain kernel listener (tcp).
  const int lfd = san_socket(AF_INET, SOCK_SAN, 0);
  sockaddr_in any = Loopback(0);
  ASSERT_EQ(san_bind(lfd, reinterpret_cast<sockaddr*>(&any), sizeof any), 0);
  ASSERT_EQ(san_listen(lfd, 4), 0);
  const int plain = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(bind(plain, reinterpret_cast<sockaddr*>(&any), sizeof any), 0);
  ASSERT_EQ(listen(plain, 4), 0);

  const int shm_client = san_socket(AF_INET, SOCK_SAN, 0);
  sockaddr_in to = Loopback(PortOf(lfd));
  ASSERT_EQ(san_connect(shm_client, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
  const int shm_server = san_accept(lfd, nullptr, nullptr);
  ASSERT_GE(shm_server, 0);
  ASSERT_EQ(san_send(shm_client, "hello", 5, 0), 5);
  char buf[5];
  ASSERT_EQ(san_recv(shm_server, buf, 5, MSG_WAITALL), 5);

  const int tcp_client = san_socket(AF_INET, SOCK_SAN, 0);
  to = Loopback(PortOf(plain));
  ASSERT_EQ(san_connect(tcp_client, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);

  const std::string out =
      Capture(std::string(SANSTAT_BIN) + " -a --json -p " + std::to_string(getpid()));
  auto has = [&](const std::string& needle) { return out.find(needle) != std::string::npos; };
  const std::string fd = "\"fd\":";
  EXPECT_TRUE(has(fd + std::to_string(shm_client) + ",\"role\":\"conn\",\"mode\":\"shm\"")) << out;
  EXPECT_TRUE(has(fd + std::to_string(shm_server) + ",\"role\":\"conn\",\"mode\":\"shm\"")) << out;
  EXPECT_TRUE(has(fd + std::to_string(tcp_client) + ",\"role\":\"conn\",\"mode\":\"tcp\"")) << out;
  EXPECT_TRUE(has(fd + std::to_string(lfd) + ",\"role\":\"listen\"")) << out;
  EXPECT_TRUE(has("\"bytes_sent\":5,")) << out;
  EXPECT_TRUE(has("no SAN listener")) << out;  // the fallback reason is shown

  // Without -a, listening sockets are left out; the table form has a header.
  const std::string table = Capture(std::string(SANSTAT_BIN) + " -p " + std::to_string(getpid()));
  EXPECT_NE(table.find("FALLBACK"), std::string::npos) << table;
  EXPECT_EQ(table.find(" listen "), std::string::npos) << table;
  EXPECT_NE(table.find(" conn   shm "), std::string::npos) << table;

  for (int f : {shm_client, shm_server, tcp_client, lfd}) EXPECT_EQ(san_close(f), 0);
  close(plain);
  // A closed socket disappears from the report.
  const std::string after =
      Capture(std::string(SANSTAT_BIN) + " -a --json -p " + std::to_string(getpid()));
  EXPECT_EQ(after.find(fd + std::to_string(shm_client) + ","), std::string::npos) << after;
}

TEST(StatReport, ParsesWellFormedAndSkipsMalformedLines) {
  std::vector<san::tools::StatRow> rows;
  const std::string report =
      "#sanlib-stat 1 42 prog\n"
      "7\tconn\tshm\t127.0.0.1:1\t127.0.0.1:2\t10\t20\t31\t32768\tOPEN\t-\n"
      "8\tconn\ttcp\t127.0.0.1:3\t127.0.0.1:4\t0\t0\t0\t0\t-\tno SAN listener\n"
      "9\tconn\tshm\ttoo few fields\n"
      "x\tconn\tshm\ta\tb\t1\t2\t3\t4\tOPEN\t-\n"
      "10\tconn\tshm\ta\tb\t99999999999999999999999\t2\t3\t4\tOPEN\t-\n";
  EXPECT_EQ(san::tools::ParseReport(report, &rows), 3);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].pid, 42);
  EXPECT_EQ(rows[0].bytes_received, 20u);
  EXPECT_EQ(rows[1].reason, "no SAN listener");
  EXPECT_EQ(san::tools::ParseReport("garbage\n", &rows), 1);
  EXPECT_EQ(san::tools::StatPids("0: 00 @sanlib/ctl/123\n0: 00 @sanlib/ctl/123\n"
                                 "0: 00 @sanlib/ctl/x\n0: 00 @other/9\n"),
            std::vector<int>{123});
}

TEST(StatReport, RandomInputNeverCrashes) {
  std::mt19937 rng(7);
  const char alphabet[] = "0123456789\t\n #abcdefsanlib-stat";
  for (int i = 0; i < 2000; ++i) {
    std::string s = i % 2 ? "#sanlib-stat 1 5 p\n" : "";
    const int len = static_cast<int>(rng() % 300);
    for (int j = 0; j < len; ++j) s += alphabet[rng() % (sizeof alphabet - 1)];
    std::vector<san::tools::StatRow> rows;
    san::tools::ParseReport(s, &rows);
    san::tools::StatPids(s);
  }
}

}  // namespace
