// drpc-bench: BCL-4/IP Figure 9 for drpc. Measures, in the same run,
//   Ping round trips (payload 0, 64, 256, 1 KiB, 4 KiB; median, mean and p99) over san:// and
//   over plain TCP, in short blocks in ABBA order so drift on a busy machine hits both alike, and
//   Push and Pull of one file (145 MB by default) over each, in MB/s (median of several runs),
// and prints each pair with the ratio (TCP time / SAN time: above 1 means SAN is faster).
// Both sides of each transport are the same programs (drpcd; this program's client process,
// bench_client.h); the TCP pair runs with SAN_PROVIDER=off, so no SAN socket shares its epoll
// set and the baseline is plain gRPC over kernel TCP.
// Every pulled file is compared with the file pushed, and the SAN client's channel must be on
// shared memory: otherwise the run fails (exit 1), never reporting a TCP figure as SAN.
// --csv adds the CPU of client and drpcd per ping call and per transfer (bench/report reads it).
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
#include <iterator>
#include <random>
#include <sstream>
#include <thread>

#include "../shared/process_cpu.h"
#include "bench_client.h"
#include "drpc/transport/malloc_tuning.h"

namespace po = boost::program_options;
using namespace san::drpc;
using san::drpc::bench::BenchClient;
using Clock = std::chrono::steady_clock;

extern char** environ;

namespace {

struct Stats {
  double mean = 0, p50 = 0, p99 = 0;
};

Stats Summarize(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  s.p50 = v[v.size() / 2];
  s.p99 = v[std::min(v.size() - 1, (v.size() * 99 + 99) / 100 - 1)];
  return s;
}

std::string Ratio(double tcp, double san) {
  char b[32];
  snprintf(b, sizeof b, "%.2fx", san > 0 ? tcp / san : 0.0);
  return b;
}

// Whether two files hold the same bytes.
bool SameFile(const std::string& a, const std::string& b) {
  std::ifstream x(a, std::ios::binary), y(b, std::ios::binary);
  std::vector<char> bx(1 << 20), by(1 << 20);
  while (x && y) {
    x.read(bx.data(), static_cast<std::streamsize>(bx.size()));
    y.read(by.data(), static_cast<std::streamsize>(by.size()));
    if (x.gcount() != y.gcount() || !std::equal(bx.begin(), bx.begin() + x.gcount(), by.begin())) {
      return false;
    }
  }
  return x.eof() && y.eof();
}

class NodeProcess {
 public:
  // name: this node's port file and root under dir; env: entries put before ours.
  bool Start(const std::string& drpcd, const std::string& dir, const std::string& name,
             const std::vector<std::string>& env) {
    const std::string port_file = dir + "/" + name + ".port", root = dir + "/" + name;
    std::filesystem::create_directory(root);
    std::vector<std::string> args = {drpcd,    "--listen", "127.0.0.1:0",  "--port-file", port_file,
                                     "--root", root,       "--token-file", dir + "/token"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> envs(env);
    for (char** e = environ; *e; ++e) envs.emplace_back(*e);
    std::vector<char*> envp;
    for (std::string& e : envs) envp.push_back(e.data());
    envp.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), envp.data()) != 0) return false;
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
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  TuneMallocForBulkTransfers();  // the client processes are this program too
  std::string drpcd = DRPCD_BIN, csv, sizes_text = "0,64,256,1024,4096";
  std::string client_target, client_token;
  int iters = 2000, warmup = 500;
  double push_mb = 145;
  uint32_t push_timeout_s = 120;
  int transfer_runs = 5;
  po::options_description desc(
      "usage: drpc-bench [options]\n"
      "drpc Ping latency and Push throughput over SAN sockets and kernel TCP, same run\noptions");
  desc.add_options()("help,h", "this text")("drpcd", po::value(&drpcd), "drpcd to start")(
      "iters", po::value(&iters), "round trips per payload size and transport (2000)")(
      "warmup", po::value(&warmup), "unmeasured round trips before each size (500)")(
      "sizes", po::value(&sizes_text), "payload sizes (0,64,256,1024,4096)")(
      "push-mb", po::value(&push_mb), "size of the pushed file in MB, 0 = no push (145)")(
      "push-timeout", po::value(&push_timeout_s),
      "deadline of each push and pull in seconds (120)")("transfer-runs", po::value(&transfer_runs),
                                                         "pushes and pulls per transport (5)")(
      "csv", po::value(&csv), "also write the figures here");
  po::options_description internal("internal");
  internal.add_options()("client", po::value(&client_target), "run as the client process")(
      "client-token", po::value(&client_token), "its token");
  po::options_description all;
  all.add(desc).add(internal);
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, all), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    fprintf(stderr, "drpc-bench: %s\n", e.what());
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  if (!client_target.empty()) {
    return san::drpc::bench::RunClientProcess(client_target, client_token);
  }
  std::vector<int> sizes;
  std::stringstream ss(sizes_text);
  for (std::string item; std::getline(ss, item, ',');) sizes.push_back(std::stoi(item));
  if (iters < 10 || warmup < 0 || push_mb < 0 || push_mb > 100000 || transfer_runs < 1 ||
      transfer_runs > 1000) {
    fprintf(stderr,
            "drpc-bench: --iters >= 10, --warmup >= 0, --push-mb 0..100000, --transfer-runs "
            "1..1000\n");
    return 2;
  }
  char self[4096];
  const ssize_t self_len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (self_len <= 0) {
    perror("drpc-bench: /proc/self/exe");
    return 1;
  }
  self[self_len] = '\0';

  char tmpl[] = "/tmp/drpc-bench-XXXXXX";
  if (!mkdtemp(tmpl)) return 1;
  const std::string dir = tmpl;
  const std::string token = "bench-token-0123456789abcdef";
  {
    std::ofstream(dir + "/token") << token << "\n";
    chmod((dir + "/token").c_str(), 0600);
  }
  int rc = 0;
  {
    // The SAN pair and the TCP pair: the same drpcd and client code, SAN off for the second.
    const std::vector<std::string> san_env, tcp_env = {"SAN_PROVIDER=off"};
    NodeProcess san_node, tcp_node;
    if (!san_node.Start(drpcd, dir, "san", san_env) ||
        !tcp_node.Start(drpcd, dir, "tcp", tcp_env)) {
      fprintf(stderr, "drpc-bench: drpcd did not start (%s)\n", drpcd.c_str());
      std::filesystem::remove_all(dir);
      return 1;
    }
    std::string error;
    BenchClient san, tcp;
    if (!san.Start(self, "san://127.0.0.1:" + std::to_string(san_node.port()), token, san_env,
                   &error) ||
        !tcp.Start(self, "127.0.0.1:" + std::to_string(tcp_node.port()), token, tcp_env, &error)) {
      fprintf(stderr, "drpc-bench: client: %s\n", error.c_str());
      std::filesystem::remove_all(dir);
      return 1;
    }
    printf(
        "drpc-bench: SAN: drpcd on 127.0.0.1:%d, channel %s; TCP (SAN_PROVIDER=off both ends): "
        "drpcd on 127.0.0.1:%d, channel %s\n",
        san_node.port(), san.mode().c_str(), tcp_node.port(), tcp.mode().c_str());
    if (san.mode() != "shm") {
      fprintf(stderr, "drpc-bench: FAILED: the SAN channel is on %s, not shm\n",
              san.mode().c_str());
      std::filesystem::remove_all(dir);
      return 1;
    }
    printf(
        "\nPing round trip, microseconds (%d calls per size and transport, alternating blocks)\n",
        iters);
    // The median is the figure least moved by other load on a shared machine; mean and p99 say
    // what the load did.
    printf("%8s %9s %9s %9s %9s %9s %9s %7s %7s %7s\n", "bytes", "san p50", "san mean", "san p99",
           "tcp p50", "tcp mean", "tcp p99", "p50 x", "mean x", "p99 x");
    FILE* csv_file = csv.empty() ? nullptr : fopen(csv.c_str(), "w");
    if (csv_file)
      fprintf(csv_file,
              "kind,size,san_p50_us,san_mean_us,san_p99_us,tcp_p50_us,tcp_mean_us,"
              "tcp_p99_us,san_cpu_us,tcp_cpu_us\n");
    // CPU of the client process and its drpcd, for one transport.
    auto pair_cpu = [&](int which) {
      return san::bench::ProcessCpuSeconds(which == 0 ? san_node.pid() : tcp_node.pid()) +
             san::bench::ProcessCpuSeconds((which == 0 ? san : tcp).pid());
    };
    for (int size : sizes) {
      std::vector<double> s_us, t_us;
      // Many short blocks, in ABBA order (SAN, TCP, TCP, SAN, ...): this VM's wake-up cost
      // switches between two levels for stretches of a few hundred calls (a block of Pings is
      // 20-25 or 55-85 us, both transports alike), and with 4 long blocks one transport could
      // draw more of the slow stretches than the other (ce35ed3's report: 0 B both sleeping
      // 0.70x while the sizes around it were 1.0-1.1x).
      constexpr int kBlocks = 16;
      // Warm-up: the first thousand or so calls on a connection are slower on both transports
      // (gRPC's flow-control and BDP pings settling, caches, thread placement).
      bool ok = san.Ping(size, warmup, nullptr, &error) && tcp.Ping(size, warmup, nullptr, &error);
      double cpu[2] = {0, 0};  // per transport, over its measured blocks
      for (int b = 0; ok && b < 2 * kBlocks; ++b) {
        const int which = (b / 2 + b) % 2;  // 0 1 1 0 0 1 1 0 ...: SAN, TCP, TCP, SAN, ...
        const double c0 = pair_cpu(which);
        ok = (which == 0 ? san : tcp)
                 .Ping(size, iters / kBlocks, which == 0 ? &s_us : &t_us, &error);
        cpu[which] += pair_cpu(which) - c0;
      }
      if (!ok) {
        fprintf(stderr, "drpc-bench: %s\n", error.c_str());
        rc = 1;
        break;
      }
      const Stats s = Summarize(s_us), t = Summarize(t_us);
      printf("%8d %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %7s %7s %7s\n", size, s.p50, s.mean, s.p99,
             t.p50, t.mean, t.p99, Ratio(t.p50, s.p50).c_str(), Ratio(t.mean, s.mean).c_str(),
             Ratio(t.p99, s.p99).c_str());
      fflush(stdout);
      if (csv_file) {
        fprintf(csv_file, "ping,%d,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.3f,%.3f\n", size, s.p50, s.mean,
                s.p99, t.p50, t.mean, t.p99,
                s_us.empty() ? 0.0 : cpu[0] * 1e6 / static_cast<double>(s_us.size()),
                t_us.empty() ? 0.0 : cpu[1] * 1e6 / static_cast<double>(t_us.size()));
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
      // Several transfers per direction and transport, alternating which transport goes first,
      // so that other load on the machine hits both alike; the median is the figure.
      struct Series {
        std::vector<double> mbps[2];    // [0] SAN, [1] TCP
        std::vector<double> cpu_ms[2];  // client + drpcd CPU per transfer
      };
      // [0] the bytes in the call's messages, [1] on a data connection.
      Series push[2], pull[2];
      NodeProcess* nodes[2] = {&san_node, &tcp_node};
      auto cpu_of = [&](int which) {
        return san::bench::ProcessStatCpuSeconds(nodes[which]->pid()) +
               san::bench::ProcessStatCpuSeconds((which == 0 ? san : tcp).pid());
      };
      for (int run = 0; rc == 0 && run < transfer_runs; ++run) {
        for (int k = 0; k < 4; ++k) {
          const int which = (run + k) % 2;
          const bool data = ((run + k) / 2) % 2 == 1;
          BenchClient& client = which == 0 ? san : tcp;
          const std::string name = std::string(which == 0 ? "SAN" : "TCP") +
                                   (data ? " (data connection)" : " (in the call)");
          uint64_t sent = 0;
          double seconds = 0;
          double cpu0 = cpu_of(which);
          // A transfer that fails (e.g. stalls past its deadline) is reported and the run goes
          // on: the other transport's figure is still worth having.
          // The previous run's copy goes first, untimed: a push that replaces a file also
          // frees the old one's pages and blocks, which is not the transfer's cost.
          std::filesystem::remove(dir + (which == 0 ? "/san" : "/tcp") + "/pushed.bin");
          if (!client.Push(local, "pushed.bin", push_timeout_s, data, &sent, &seconds, &error)) {
            fprintf(stderr, "drpc-bench: push over %s: %s\n", name.c_str(), error.c_str());
            rc = 1;
            continue;
          }
          push[data].mbps[which].push_back(seconds > 0 ? static_cast<double>(sent) / 1e6 / seconds
                                                       : 0);
          push[data].cpu_ms[which].push_back((cpu_of(which) - cpu0) * 1000);
          cpu0 = cpu_of(which);
          const std::string pulled = dir + "/pulled-" + std::to_string(which) + ".bin";
          if (!client.Pull("pushed.bin", pulled, push_timeout_s, data, &sent, &seconds, &error)) {
            fprintf(stderr, "drpc-bench: pull over %s: %s\n", name.c_str(), error.c_str());
            rc = 1;
            continue;
          }
          if (!SameFile(local, pulled)) {
            fprintf(stderr,
                    "drpc-bench: pull over %s: the file pulled differs from the one pushed\n",
                    name.c_str());
            rc = 1;
            continue;
          }
          std::filesystem::remove(pulled);
          pull[data].mbps[which].push_back(seconds > 0 ? static_cast<double>(sent) / 1e6 / seconds
                                                       : 0);
          pull[data].cpu_ms[which].push_back((cpu_of(which) - cpu0) * 1000);
        }
      }
      printf(
          "\nPush and Pull of a %.0f MB file, MB/s, %d runs each: \"call\": the bytes in the "
          "call's messages\n(header, 256 KiB chunks, CRC-32C both ends); \"data\": on a data "
          "connection beside the call\n(san_sendfile/san_recvfile; on TCP the kernel's sendfile "
          "and a receive into the file);\ncpu: CPU time of the client and its drpcd per transfer, "
          "median (cpu x: TCP/SAN)\n",
          push_mb, transfer_runs);
      printf("%11s %10s %10s %12s %21s %21s %12s %12s %8s\n", "", "san p50", "tcp p50",
             "san/tcp p50", "san min..max", "tcp min..max", "san cpu ms", "tcp cpu ms", "cpu x");
      for (int row = 0; row < 4; ++row) {
        const bool data = row >= 2;
        const Series& series = row % 2 == 0 ? push[data] : pull[data];
        const std::string label =
            std::string(row % 2 == 0 ? "push" : "pull") + (data ? " data" : " call");
        const Stats s = Summarize(series.mbps[0]), t = Summarize(series.mbps[1]);
        auto range = [](std::vector<double> v) {
          char b[48];
          if (v.empty()) return std::string("-");
          std::sort(v.begin(), v.end());
          snprintf(b, sizeof b, "%.0f..%.0f", v.front(), v.back());
          return std::string(b);
        };
        const Stats sc = Summarize(series.cpu_ms[0]), tc = Summarize(series.cpu_ms[1]);
        printf("%11s %10.1f %10.1f %12s %21s %21s %12.0f %12.0f %8s\n", label.c_str(), s.p50, t.p50,
               Ratio(s.p50, t.p50).c_str(), range(series.mbps[0]).c_str(),
               range(series.mbps[1]).c_str(), sc.p50, tc.p50, Ratio(tc.p50, sc.p50).c_str());
        if (csv_file) {
          // Transfers: MB/s in the mean columns, CPU ms per transfer in the cpu columns.
          fprintf(csv_file, "%s,%zu,,%.2f,,,%.2f,,%.2f,%.2f\n", label.c_str(), bytes, s.p50, t.p50,
                  sc.p50, tc.p50);
        }
      }
    }
    if (csv_file) fclose(csv_file);
    printf(
        "\n(figures from one run on this machine: other load on it moves them; compare the "
        "ratio, not the absolute numbers)\n");
  }
  std::filesystem::remove_all(dir);
  return rc;
}
