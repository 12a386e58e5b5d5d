// drpc-bench: BCL-4/IP Figure 9 for drpc. Starts one drpcd, then in the same run measures
//   Ping round trips (payload 0, 64, 256, 1 KiB, 4 KiB; mean and p99) over san:// and over
//   plain TCP, in alternating blocks so drift on a busy machine hits both alike, and
//   Push of one file (145 MB by default) over each, in MB/s,
// and prints each pair with the ratio (TCP time / SAN time: above 1 means SAN is faster).
// A program that prints numbers, never a test: it fails only if something does not work.
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/program_options.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "client/commands.h"
#include "core/target.h"
#include "transport/channel.h"

namespace po = boost::program_options;
using namespace san::drpc;
using Clock = std::chrono::steady_clock;

extern char** environ;

namespace {

struct Stats {
  double mean = 0, p99 = 0;
};

Stats Summarize(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  s.p99 = v[std::min(v.size() - 1, (v.size() * 99 + 99) / 100 - 1)];
  return s;
}

bool PingBlock(::drpc::Node::Stub* stub, const std::string& payload, int n, std::vector<double>* us) {
  PingRequest req;
  req.set_payload(payload);
  PingReply reply;
  for (int i = 0; i < n; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    const Clock::time_point t0 = Clock::now();
    const grpc::Status s = stub->Ping(&ctx, req, &reply);
    const double elapsed = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (!s.ok() || reply.payload() != payload) {
      fprintf(stderr, "drpc-bench: ping failed: %s\n", s.error_message().c_str());
      return false;
    }
    if (us) us->push_back(elapsed);
  }
  return true;
}

std::string Ratio(double tcp, double san) {
  char b[32];
  snprintf(b, sizeof b, "%.2fx", san > 0 ? tcp / san : 0.0);
  return b;
}

class NodeProcess {
 public:
  bool Start(const std::string& drpcd, const std::string& dir) {
    const std::string port_file = dir + "/port";
    std::vector<std::string> args = {drpcd,          "--listen", "127.0.0.1:0",   "--port-file",
                                     port_file,      "--root",   dir + "/root",   "--token-file",
                                     dir + "/token"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return false;
    for (int i = 0; i < 2000; ++i) {
      std::ifstream in(port_file);
      int port = 0;
      if (in >> port && port > 0) {
        port_ = port;
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  ~NodeProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status;
      waitpid(pid_, &status, 0);
    }
  }
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::string drpcd = DRPCD_BIN, csv, sizes_text = "0,64,256,1024,4096";
  int iters = 2000;
  double push_mb = 145;
  uint32_t push_timeout_s = 120;
  po::options_description desc(
      "usage: drpc-bench [options]\n"
      "drpc Ping latency and Push throughput over SAN sockets and kernel TCP, same run\noptions");
  desc.add_options()("help,h", "this text")("drpcd", po::value(&drpcd), "drpcd to start")(
      "iters", po::value(&iters), "round trips per payload size and transport (2000)")(
      "sizes", po::value(&sizes_text), "payload sizes (0,64,256,1024,4096)")(
      "push-mb", po::value(&push_mb), "size of the pushed file in MB, 0 = no push (145)")(
      "push-timeout", po::value(&push_timeout_s), "deadline of each push in seconds (120)")(
      "csv", po::value(&csv), "also write the figures here");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    fprintf(stderr, "drpc-bench: %s\n", e.what());
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  std::vector<int> sizes;
  std::stringstream ss(sizes_text);
  for (std::string item; std::getline(ss, item, ',');) sizes.push_back(std::stoi(item));
  if (iters < 10 || push_mb < 0 || push_mb > 100000) {
    fprintf(stderr, "drpc-bench: --iters >= 10, --push-mb 0..100000\n");
    return 2;
  }

  char tmpl[] = "/tmp/drpc-bench-XXXXXX";
  if (!mkdtemp(tmpl)) return 1;
  const std::string dir = tmpl;
  std::filesystem::create_directory(dir + "/root");
  const std::string token = "bench-token-0123456789abcdef";
  {
    std::ofstream(dir + "/token") << token << "\n";
    chmod((dir + "/token").c_str(), 0600);
  }
  int rc = 0;
  {
    NodeProcess node;
    if (!node.Start(drpcd, dir)) {
      fprintf(stderr, "drpc-bench: drpcd did not start (%s)\n", drpcd.c_str());
      std::filesystem::remove_all(dir);
      return 1;
    }
    const Target san{"san://127.0.0.1", true, "127.0.0.1", static_cast<uint16_t>(node.port())};
    const Target tcp{"127.0.0.1", false, "127.0.0.1", static_cast<uint16_t>(node.port())};
    std::string error;
    ChannelInfo san_info, tcp_info;
    auto san_channel = MakeChannel(san, 5000, &error, &san_info);
    auto tcp_channel = san_channel ? MakeChannel(tcp, 5000, &error, &tcp_info) : nullptr;
    if (!san_channel || !tcp_channel) {
      fprintf(stderr, "drpc-bench: %s\n", error.c_str());
      std::filesystem::remove_all(dir);
      return 1;
    }
    auto san_stub = ::drpc::Node::NewStub(san_channel);
    auto tcp_stub = ::drpc::Node::NewStub(tcp_channel);
    printf("drpc-bench: drpcd on 127.0.0.1:%d; SAN channel: %s, TCP channel: %s\n", node.port(),
           san_info.mode.c_str(), tcp_info.mode.c_str());
    if (san_info.mode != "shm") printf("drpc-bench: WARNING: the SAN channel is not on shm\n");
    printf("\nPing round trip, microseconds (%d calls per size and transport, alternating blocks)\n",
           iters);
    printf("%8s %10s %10s %10s %10s %12s %12s\n", "bytes", "san mean", "san p99", "tcp mean",
           "tcp p99", "mean ratio", "p99 ratio");
    FILE* csv_file = csv.empty() ? nullptr : fopen(csv.c_str(), "w");
    if (csv_file) fprintf(csv_file, "kind,size,san_mean_us,san_p99_us,tcp_mean_us,tcp_p99_us\n");
    for (int size : sizes) {
      std::string payload(static_cast<size_t>(size), 'p');
      std::vector<double> s_us, t_us;
      constexpr int kBlocks = 4;
      bool ok = PingBlock(san_stub.get(), payload, 50, nullptr) &&
                PingBlock(tcp_stub.get(), payload, 50, nullptr);  // warm-up
      for (int b = 0; ok && b < kBlocks; ++b) {
        ok = PingBlock(san_stub.get(), payload, iters / kBlocks, &s_us) &&
             PingBlock(tcp_stub.get(), payload, iters / kBlocks, &t_us);
      }
      if (!ok) {
        rc = 1;
        break;
      }
      const Stats s = Summarize(s_us), t = Summarize(t_us);
      printf("%8d %10.1f %10.1f %10.1f %10.1f %12s %12s\n", size, s.mean, s.p99, t.mean, t.p99,
             Ratio(t.mean, s.mean).c_str(), Ratio(t.p99, s.p99).c_str());
      if (csv_file) {
        fprintf(csv_file, "ping,%d,%.2f,%.2f,%.2f,%.2f\n", size, s.mean, s.p99, t.mean, t.p99);
      }
    }
    if (rc == 0 && push_mb > 0) {
      const std::string local = dir + "/push.bin";
      const size_t bytes = static_cast<size_t>(push_mb * 1e6);
      {
        std::ofstream out(local, std::ios::binary);
        std::mt19937_64 rng(1);
        std::vector<uint64_t> block(1 << 16);
        for (size_t done = 0; done < bytes;) {
          for (uint64_t& w : block) w = rng();
          const size_t n = std::min(bytes - done, block.size() * sizeof(uint64_t));
          out.write(reinterpret_cast<const char*>(block.data()), static_cast<std::streamsize>(n));
          done += n;
        }
      }
      CallSettings cs;
      cs.token = token;
      cs.timeout_ms = push_timeout_s * 1000;
      double mbps[2] = {0, 0};
      for (int which = 0; which < 2; ++which) {
        uint64_t sent = 0;
        const Clock::time_point t0 = Clock::now();
        // A push that fails (e.g. stalls past its deadline) is reported and the run goes on:
        // the other transport's figure is still worth having.
        if (!PushFile(which == 0 ? san_stub.get() : tcp_stub.get(), cs, local, "pushed.bin", 0644,
                      true, &sent, &error)) {
          fprintf(stderr, "drpc-bench: push over %s: %s\n", which == 0 ? "SAN" : "TCP",
                  error.c_str());
          rc = 1;
          continue;
        }
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        mbps[which] = static_cast<double>(sent) / 1e6 / s;
      }
      {
        printf("\nPush of a %.0f MB file (header, 256 KiB chunks, checksum both ends), MB/s\n",
               push_mb);
        printf("%10s %10s %12s\n", "san", "tcp", "san/tcp");
        printf("%10.1f %10.1f %12s\n", mbps[0], mbps[1], Ratio(mbps[0], mbps[1]).c_str());
        if (csv_file) fprintf(csv_file, "push,%zu,%.2f,,%.2f,\n", bytes, mbps[0], mbps[1]);
      }
    }
    if (csv_file) fclose(csv_file);
    printf("\n(figures from one run on this machine: other load on it moves them; compare the "
           "ratio, not the absolute numbers)\n");
  }
  std::filesystem::remove_all(dir);
  return rc;
}
