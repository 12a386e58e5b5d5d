// Interoperability: Python's grpcio (Debian python3-grpcio), a gRPC implementation we did not
// write, calls drpcd over kernel TCP on the same port SAN clients use. The Python message module
// is generated at test time by protoc from drpc.proto.
#include <gtest/gtest.h>

#include "process.h"

namespace san::drpc::testing {
namespace {

TEST(DrpcPython, GrpcioClientCallsPingAndStatusOverTcp) {
  const RunResult probe = RunProgram({PYTHON3_BIN, "-c", "import grpc, google.protobuf"});
  if (probe.exit_code != 0) GTEST_SKIP() << "python3-grpcio / python3-protobuf not installed";
  TempDir dir;
  const RunResult gen = RunProgram({PROTOC_BIN, "--proto_path=" + std::string(DRPC_PROTO_DIR),
                             "--python_out=" + dir.path(), "drpc.proto"});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  const std::string token = "python-token-0123456789";
  WriteFile(dir.Join("token"), token + "\n", 0600);
  Daemon d;
  ASSERT_TRUE(d.Start(dir.path(), "127.0.0.1", {"--token-file", dir.Join("token")})) << d.log();
  const RunResult py =
      RunProgram({PYTHON3_BIN, PLAIN_PING_PY, dir.path(), std::to_string(d.port()), token}, 60);
  EXPECT_EQ(py.exit_code, 0) << py.out << py.err;
  EXPECT_NE(py.out.find("ok 5 transport=tcp (peer did not set up a SAN channel"), std::string::npos)
      << py.out << py.err;
  EXPECT_EQ(d.Stop(), 0) << d.log();
}

}  // namespace
}  // namespace san::drpc::testing
