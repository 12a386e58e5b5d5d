// drpcd: the drpc node daemon (docs/drpc.md). Serves drpc.Node on one port to SAN clients
// (san://) and plain gRPC clients alike, until SIGTERM or SIGINT.
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <unistd.h>

#include <grpcpp/server_builder.h>

#include <boost/program_options.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <set>

#include "drpc/core/command_policy.h"
#include "drpc/core/target.h"
#include "drpc/core/token.h"
#include "drpc/node/node_service.h"
#include "drpc/transport/acceptor.h"
#include "drpc/transport/channel.h"
#include "drpc/transport/malloc_tuning.h"

namespace po = boost::program_options;
using namespace san::drpc;

namespace {

bool SecondsToMs(double s, uint32_t* out) {
  if (!(s > 0) || s > 86400 * 30) return false;
  *out = static_cast<uint32_t>(s * 1000);
  return *out > 0;
}

int Fail(const std::string& message) {
  fprintf(stderr, "drpcd: %s\n", message.c_str());
  return 2;
}

// Written once the port is known (tests and scripts start drpcd on port 0): to a temporary name,
// then renamed, so a reader never sees a partial file.
bool WritePortFile(const std::string& path, uint16_t port) {
  const std::string temp = path + ".tmp";
  FILE* f = fopen(temp.c_str(), "we");
  if (!f) return false;
  fprintf(f, "%u\n", port);
  if (fclose(f) != 0) return false;
  return rename(temp.c_str(), path.c_str()) == 0;
}

// A uid, as a number or a user name.
std::optional<uid_t> ParseUser(const std::string& text) {
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos &&
      text.size() <= 10) {
    const unsigned long v = std::stoul(text);
    if (v < static_cast<unsigned long>(static_cast<uid_t>(-1))) return static_cast<uid_t>(v);
    return std::nullopt;
  }
  passwd pw{}, *found = nullptr;
  std::vector<char> buf(16384);
  if (getpwnam_r(text.c_str(), &pw, buf.data(), buf.size(), &found) != 0 || !found) {
    return std::nullopt;
  }
  return pw.pw_uid;
}

}  // namespace

int main(int argc, char** argv) {
  san::drpc::TuneMallocForBulkTransfers();  // before gRPC starts its threads
  std::string listen_text = "0.0.0.0:7467", port_file, token_file, policy_file, root;
  std::vector<std::string> allow, allow_uid;
  bool no_auth = false;
  double default_timeout_s = 60, max_timeout_s = 3600;
  size_t task_slots = 2;
  uint32_t poll_interval_ms = 1000;
  po::options_description desc(
      "usage: drpcd [options]\n"
      "Serves drpc.Node (ping, exec, status, push, pull, submit/wait/cancel) on one port, to\n"
      "SAN clients (san://host:port: gRPC over shared memory) and plain gRPC clients over TCP.\n"
      "options");
  desc.add_options()("help,h", "this text")(
      "listen", po::value(&listen_text),
      "HOST:PORT to listen on (default 0.0.0.0:7467; port 0: any)")(
      "port-file", po::value(&port_file), "write the bound port here once listening")(
      "token-file", po::value(&token_file),
      "the shared token (mode 600); this and/or --allow-uid, unless --no-auth")(
      "allow-uid", po::value(&allow_uid),
      "admit calls from this local user (uid or name; repeatable) without a token: clients on "
      "this host whose socket it owns, over SAN or TCP")(
      "no-auth", po::bool_switch(&no_auth), "accept calls without a token (trusted networks only)")(
      "allow-cmd", po::value(&allow),
      "a command Exec/Submit may run (glob on argv[0]; repeatable)")(
      "policy-file", po::value(&policy_file), "allowed command patterns, one per line")(
      "root", po::value(&root), "directory Push/Pull are confined to (none: both refused)")(
      "default-timeout", po::value(&default_timeout_s),
      "Exec timeout when the client gives none, s (60)")(
      "max-timeout", po::value(&max_timeout_s),
      "largest Exec timeout a client may ask for, s (3600)")("task-slots", po::value(&task_slots),
                                                             "queued tasks run at once (2)")(
      "poll-interval-ms", po::value(&poll_interval_ms),
      "gRPC's polling thread re-polls at least this often (1000)");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    return Fail(std::string(e.what()) + " (see --help)");
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }

  san::Result<Target> listen = ParseListenAddress(listen_text);
  if (!listen.ok()) return Fail("--listen " + listen_text + ": " + listen.status().call());
  NodeConfig config;
  if (!SecondsToMs(default_timeout_s, &config.default_timeout_ms) ||
      !SecondsToMs(max_timeout_s, &config.max_timeout_ms)) {
    return Fail("timeouts are seconds, more than 0");
  }
  if (task_slots == 0 || task_slots > 256) return Fail("--task-slots is 1..256");
  if (poll_interval_ms == 0 || poll_interval_ms > 10000)
    return Fail("--poll-interval-ms is 1..10000");
  config.task_slots = task_slots;
  if (!policy_file.empty()) {
    std::ifstream in(policy_file);
    if (!in) return Fail("--policy-file " + policy_file + ": cannot be read");
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    int line = 0;
    san::Result<CommandPolicy> p = CommandPolicy::Parse(text, &line);
    if (!p.ok()) return Fail(policy_file + ":" + std::to_string(line) + ": " + p.status().call());
    config.policy = std::move(p).value();
  }
  for (std::string& a : allow) config.policy.Add(std::move(a));

  if (no_auth == (!token_file.empty() || !allow_uid.empty())) {
    return Fail("give --token-file and/or --allow-uid, or --no-auth");
  }
  std::set<uid_t> uids;
  for (const std::string& u : allow_uid) {
    std::optional<uid_t> uid = ParseUser(u);
    if (!uid) return Fail("--allow-uid " + u + ": no such user");
    uids.insert(*uid);
  }
  std::optional<std::string> token;
  if (!token_file.empty()) {
    san::Result<std::string> t = LoadTokenFile(token_file);
    if (!t.ok()) return Fail("--token-file " + token_file + ": " + t.status().ToString());
    token = std::move(t).value();
  }
  Auth auth = no_auth ? Auth::Open() : Auth::Require(std::move(token), uids);
  if (no_auth) {
    fprintf(stderr, "drpcd: warning: --no-auth: anybody who reaches this port may call it\n");
  }
  std::unique_ptr<san::files::Jail> jail;
  if (!root.empty()) {
    san::Result<san::files::Jail> j = san::files::Jail::Open(root);
    if (!j.ok()) return Fail("--root " + root + ": " + j.status().ToString());
    jail = std::make_unique<san::files::Jail>(std::move(j).value());
  }

  // Signals: SIGPIPE ignored (a client gone mid-write is an error return, not death); SIGTERM and
  // SIGINT blocked in every thread and taken synchronously below.
  signal(SIGPIPE, SIG_IGN);
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  san::Result<std::unique_ptr<Acceptor>> acceptor = Acceptor::Listen(listen->host, listen->port);
  if (!acceptor.ok()) return Fail("listen on " + listen_text + ": " + acceptor.status().ToString());
  (*acceptor)->set_learn_peer_uids(!uids.empty());
  config.listen_host = listen->host;
  NodeService service(std::move(config), std::move(auth), std::move(jail), acceptor->get());
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  PingServer ping_server(&service, &builder);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  // The sync API's threads (every call but Ping, see node/ping_server.h): one completion queue,
  // one to two polling threads. A poller that picks up a call runs its handler itself, and
  // gRPC's thread manager starts a new thread whenever fewer than MIN_POLLERS are left polling;
  // a poller back from a call keeps polling only while fewer than MAX_POLLERS are. With
  // MAX_POLLERS 1 that was one thread created and one ended for every call (a clone3 per call,
  // on the call's critical path); with 2 the two take turns.
  builder.SetSyncServerOption(grpc::ServerBuilder::NUM_CQS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::MIN_POLLERS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::MAX_POLLERS, 2);
  // The polling threads come back to gRPC at least this often (gRPC's default: 10 s): how soon
  // the thread count adapts and shutdown is noticed. Costs 1000/poll_interval_ms idle wake-ups a
  // second.
  builder.SetSyncServerOption(grpc::ServerBuilder::CQ_TIMEOUT_MSEC,
                              static_cast<int>(poll_interval_ms));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) return Fail("gRPC server did not start");
  ping_server.Start();
  (*acceptor)->Start(server.get());
  if (!port_file.empty() && !WritePortFile(port_file, (*acceptor)->port())) {
    perror("drpcd: --port-file");
  }
  fprintf(stderr, "drpcd: listening on %s port %u (SAN and TCP)\n", listen->host.c_str(),
          (*acceptor)->port());

  int sig = 0;
  sigwait(&stop, &sig);
  fprintf(stderr, "drpcd: %s, shutting down (%llu SAN and %llu TCP connections served)\n",
          strsignal(sig), static_cast<unsigned long long>((*acceptor)->accepted_shm()),
          static_cast<unsigned long long>((*acceptor)->accepted_tcp()));
  (*acceptor)->Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server->Wait();
  ping_server.Shutdown();
  return 0;
}
