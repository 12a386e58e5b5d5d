#include "bench_client.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <sstream>

#include "drpc/client/commands.h"
#include "drpc/client/data_transfer.h"
#include "drpc/client/ping_caller.h"
#include "drpc/core/target.h"
#include "drpc/transport/channel.h"

extern char** environ;

namespace san::drpc::bench {
namespace {

using Clock = std::chrono::steady_clock;

bool PingBlock(Node::Stub* stub, const std::string& payload, int n, std::vector<double>* us,
               std::string* error) {
  PingRequest req;
  req.set_payload(payload);
  PingReply reply;
  PingCaller caller(stub);  // as drpc ping calls (client/ping_caller.h)
  for (int i = 0; i < n; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    const Clock::time_point t0 = Clock::now();
    const grpc::Status s = caller.Call(&ctx, req, &reply);
    const double elapsed = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (!s.ok() || reply.payload() != payload) {
      *error = "ping failed: " + (s.ok() ? std::string("wrong payload back") : s.error_message());
      return false;
    }
    if (us) us->push_back(elapsed);
  }
  return true;
}

// One line of the protocol, without newlines inside.
std::string OneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

}  // namespace

int RunClientProcess(const std::string& target_text, const std::string& token) {
  Result<Target> target = ParseTarget(target_text);
  if (!target.ok()) {
    printf("error bad target %s\n", target_text.c_str());
    return 1;
  }
  std::string error;
  ChannelInfo info;
  auto channel = MakeChannel(*target, 5000, &error, &info);
  if (!channel) {
    printf("error %s\n", OneLine(error).c_str());
    return 1;
  }
  auto stub = Node::NewStub(channel);
  printf("ready %s\n", OneLine(info.mode).c_str());
  fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    std::string verb;
    in >> verb;
    std::string out;
    if (verb == "ping") {
      int size = 0, n = 0, record = 0;
      in >> size >> n >> record;
      std::vector<double> us;
      if (!in || size < 0 || n < 0) {
        out = "error bad ping command";
      } else if (!PingBlock(stub.get(), std::string(static_cast<size_t>(size), 'p'), n,
                            record ? &us : nullptr, &error)) {
        out = "error " + OneLine(error);
      } else {
        out = "ok";
        char b[32];
        for (double v : us) {
          snprintf(b, sizeof b, " %.3f", v);
          out += b;
        }
      }
    } else if (verb == "push" || verb == "pull") {
      // push LOCAL REMOTE TIMEOUT_S HOW / pull REMOTE LOCAL TIMEOUT_S HOW; HOW: call or data
      std::string from, to, how;
      uint32_t timeout_s = 0;
      in >> from >> to >> timeout_s >> how;
      CallSettings cs;
      cs.token = token;
      cs.timeout_ms = timeout_s * 1000;
      uint64_t bytes = 0;
      const bool push = verb == "push";
      const Clock::time_point t0 = Clock::now();
      bool ok = false;
      if (!in || timeout_s == 0 || (how != "call" && how != "data")) {
        error = "bad " + verb + " command";
      } else if (how == "data") {
        ok = (push ? PushOnDataConnection(stub.get(), *target, cs, from, to, 0644, true, &bytes,
                                          &error)
                   : PullOnDataConnection(stub.get(), *target, cs, from, to, &bytes, &error)) ==
             DataOutcome::kDone;
      } else {
        ok = push ? PushFile(channel, cs, from, to, 0644, true, &bytes, &error)
                  : PullFile(stub.get(), cs, from, to, &bytes, &error);
      }
      if (!ok) {
        out = "error " + OneLine(error);
      } else {
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        char b[64];
        snprintf(b, sizeof b, "ok %llu %.6f", static_cast<unsigned long long>(bytes), s);
        out = b;
      }
    } else {
      out = "error unknown command";
    }
    printf("%s\n", out.c_str());
    fflush(stdout);
  }
  return 0;
}

BenchClient::~BenchClient() {
  if (to_) fclose(to_);  // end of input: the child exits
  if (from_) fclose(from_);
  if (pid_ > 0) {
    int status;
    if (waitpid(pid_, &status, WNOHANG) == 0) {
      // Give it a moment to close its channel, then make sure.
      for (int i = 0; i < 200 && waitpid(pid_, &status, WNOHANG) == 0; ++i) usleep(10000);
      if (kill(pid_, SIGKILL) == 0) waitpid(pid_, &status, 0);
    }
  }
}

bool BenchClient::Start(const std::string& self, const std::string& target,
                        const std::string& token, const std::vector<std::string>& env,
                        std::string* error) {
  int down[2], up[2];
  if (pipe2(down, O_CLOEXEC) != 0) {
    *error = std::string("pipe: ") + strerror(errno);
    return false;
  }
  if (pipe2(up, O_CLOEXEC) != 0) {
    *error = std::string("pipe: ") + strerror(errno);
    close(down[0]);
    close(down[1]);
    return false;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, down[0], 0);
  posix_spawn_file_actions_adddup2(&fa, up[1], 1);
  std::vector<std::string> args = {self, "--client", target, "--client-token", token};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> envs(env);
  for (char** e = environ; *e; ++e) envs.emplace_back(*e);  // ours after: the first one wins
  std::vector<char*> envp;
  for (std::string& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int rc = posix_spawn(&pid_, self.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(down[0]);
  close(up[1]);
  if (rc != 0) {
    close(down[1]);
    close(up[0]);
    pid_ = -1;
    *error = "spawn " + self + ": " + strerror(rc);
    return false;
  }
  to_ = fdopen(down[1], "w");
  from_ = fdopen(up[0], "r");
  std::string answer;
  if (!Ask("", &answer, error)) return false;
  if (answer.rfind("ready ", 0) != 0) {
    *error = "client: " + answer;
    return false;
  }
  mode_ = answer.substr(6);
  return true;
}

bool BenchClient::Ask(const std::string& command, std::string* answer, std::string* error) {
  if (!to_ || !from_) {
    *error = "client not running";
    return false;
  }
  if (!command.empty()) {
    fprintf(to_, "%s\n", command.c_str());
    fflush(to_);
  }
  answer->clear();
  for (int c; (c = fgetc(from_)) != EOF && c != '\n';) answer->push_back(static_cast<char>(c));
  if (answer->empty()) {
    *error = "client process ended";
    return false;
  }
  if (answer->rfind("error ", 0) == 0) {
    *error = answer->substr(6);
    return false;
  }
  return true;
}

bool BenchClient::Ping(int size, int n, std::vector<double>* us, std::string* error) {
  std::string answer;
  if (!Ask("ping " + std::to_string(size) + " " + std::to_string(n) + (us ? " 1" : " 0"), &answer,
           error)) {
    return false;
  }
  std::istringstream in(answer.substr(2));
  for (double v; in >> v;) {
    if (us) us->push_back(v);
  }
  return true;
}

bool BenchClient::Push(const std::string& local, const std::string& remote, uint32_t timeout_s,
                       bool data, uint64_t* bytes, double* seconds, std::string* error) {
  return Transfer(
      "push " + local + " " + remote + " " + std::to_string(timeout_s) + (data ? " data" : " call"),
      bytes, seconds, error);
}

bool BenchClient::Pull(const std::string& remote, const std::string& local, uint32_t timeout_s,
                       bool data, uint64_t* bytes, double* seconds, std::string* error) {
  return Transfer(
      "pull " + remote + " " + local + " " + std::to_string(timeout_s) + (data ? " data" : " call"),
      bytes, seconds, error);
}

bool BenchClient::Transfer(const std::string& command, uint64_t* bytes, double* seconds,
                           std::string* error) {
  std::string answer;
  if (!Ask(command, &answer, error)) return false;
  std::istringstream in(answer.substr(2));
  unsigned long long b = 0;
  in >> b >> *seconds;
  *bytes = b;
  return static_cast<bool>(in);
}

}  // namespace san::drpc::bench
