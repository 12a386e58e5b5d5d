#include "measure.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace san::bench {
namespace {

uint64_t Clamp(double v, uint64_t lo, uint64_t hi) {
  if (!(v > static_cast<double>(lo))) return lo;
  if (v > static_cast<double>(hi)) return hi;
  return static_cast<uint64_t>(v);
}

double Percentile(std::vector<uint32_t> samples, double q) {
  if (samples.empty()) return NAN;
  const size_t k = std::min(samples.size() - 1, static_cast<size_t>(q * samples.size()));
  std::nth_element(samples.begin(), samples.begin() + static_cast<ptrdiff_t>(k), samples.end());
  return samples[k];
}

// The measured phase runs in chunks (one phase header each, nothing else between them). The figure
// is the median of the chunks' figures, so a burst of other work on the machine moves it less than
// it would move one long average; and a time-based point stops after about twice its budget
// instead of running for as long as a disturbed rate makes the planned count last.
constexpr int kChunks = 8;

bool OverBudget(const Schedule& schedule, uint64_t elapsed_ns) {
  return schedule.iters == 0 && elapsed_ns > schedule.seconds * 2e9;
}

double Median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

Status Latency(Connection& c, const Schedule& schedule, const CpuClock& cpu, Row* row) {
  PingPongResult r;
  uint64_t count = schedule.iters;
  if (count > 0) {
    if (Status st = c.PingPong(Clamp(count / 10.0, 16, 100000), &r); !st.ok()) return st;
  } else {
    constexpr uint64_t kProbe = 32;
    if (Status st = c.PingPong(kProbe, &r); !st.ok()) return st;
    double per = std::max<double>(r.elapsed_ns, 1) / kProbe;
    const uint64_t warm = Clamp(schedule.seconds * 1e8 / per, kProbe, 100'000'000);
    if (Status st = c.PingPong(warm, &r); !st.ok()) return st;
    per = std::max<double>(r.elapsed_ns, 1) / warm;
    count = Clamp(schedule.seconds * 1e9 / per, 100, 1'000'000'000);
  }
  uint64_t done = 0, elapsed = 0;
  const double cpu0 = cpu();
  std::vector<uint32_t> samples;
  std::vector<double> chunk_one_way_us;
  for (int i = 0; i < kChunks && done < count; ++i) {
    const uint64_t n = std::max<uint64_t>(1, (count - done) / (kChunks - i));
    if (Status st = c.PingPong(n, &r); !st.ok()) return st;
    done += n;
    elapsed += r.elapsed_ns;
    chunk_one_way_us.push_back(r.elapsed_ns / 2e3 / n);
    samples.insert(samples.end(), r.rtt_samples_ns.begin(), r.rtt_samples_ns.end());
    if (OverBudget(schedule, elapsed)) break;
  }
  row->count = done;
  row->cpu_us = (cpu() - cpu0) * 1e6 / static_cast<double>(std::max<uint64_t>(done, 1));
  row->value = Median(std::move(chunk_one_way_us));
  row->p99_us = Percentile(std::move(samples), 0.99) / 2e3;
  return Status::Ok();
}

Status Bandwidth(Connection& c, uint32_t size, const Schedule& schedule, const CpuClock& cpu,
                 Row* row) {
  StreamResult r;
  uint64_t count = schedule.iters;
  auto stream = [&](uint64_t n) -> Status {
    if (Status st = c.Stream(n, &r); !st.ok()) return st;
    if (r.report.errors != 0) return Status(EBADMSG, "bandwidth: received data differs");
    return Status::Ok();
  };
  if (count > 0) {
    if (Status st = stream(Clamp(count / 10.0, 16, 1'000'000)); !st.ok()) return st;
  } else {
    const uint64_t probe = Clamp((1u << 20) / size, 16, 16384);
    if (Status st = stream(probe); !st.ok()) return st;
    double rate = probe / (std::max<double>(r.sender_elapsed_ns, 1) / 1e9);
    const uint64_t warm = Clamp(schedule.seconds * 0.1 * rate, 16, 10'000'000'000);
    if (Status st = stream(warm); !st.ok()) return st;
    rate = warm / (std::max<double>(r.sender_elapsed_ns, 1) / 1e9);
    count = Clamp(schedule.seconds * rate, 32, 10'000'000'000);
  }
  uint64_t done = 0, sender_ns = 0;
  const double cpu0 = cpu();
  std::vector<double> chunk_gbps;
  for (int i = 0; i < kChunks && done < count; ++i) {
    const uint64_t n = std::max<uint64_t>(1, (count - done) / (kChunks - i));
    if (Status st = stream(n); !st.ok()) return st;
    done += n;
    sender_ns += r.sender_elapsed_ns;
    if (r.report.elapsed_ns > 0 && r.report.bytes > 0) {
      chunk_gbps.push_back(static_cast<double>(r.report.bytes) / r.report.elapsed_ns);
    } else {  // everything arrived in one receive: only the sender's clock saw it
      chunk_gbps.push_back(static_cast<double>(n) * size /
                           std::max<uint64_t>(r.sender_elapsed_ns, 1));
    }
    if (OverBudget(schedule, sender_ns)) break;
  }
  row->count = done;
  row->cpu_us = (cpu() - cpu0) * 1e6 / static_cast<double>(std::max<uint64_t>(done, 1));
  row->value = Median(std::move(chunk_gbps));
  row->p99_us = NAN;
  return Status::Ok();
}

}  // namespace

Result<Row> MeasurePoint(Transport& transport, const std::string& address, const Setup& setup,
                         const Schedule& schedule, const CpuClock& cpu) {
  Result<std::unique_ptr<Connection>> c = transport.Connect(address, setup);
  if (!c.ok()) return c.status();
  Row row;
  row.kind = setup.kind;
  row.size = setup.size;
  Status st = setup.kind == Kind::kLatency
                  ? Latency(*c.value(), schedule, cpu, &row)
                  : Bandwidth(*c.value(), setup.size, schedule, cpu, &row);
  if (!st.ok()) return st;
  return row;
}

Status SendQuit(Transport& transport, const std::string& address) {
  Setup quit;
  quit.kind = Kind::kQuit;
  Result<std::unique_ptr<Connection>> c = transport.Connect(address, quit);
  return c.status();
}

}  // namespace san::bench
