-- wrk script of bench/report: at the end, one JSON line with what wrk measured, so the report
-- reads numbers, not wrk's prose.
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests": %d, "duration_us": %d, "bytes": %d, "socket_errors": %d, "non2xx": %d, ' ..
    '"latency_mean_us": %.3f, "latency_p99_us": %.3f}\n',
    summary.requests, summary.duration, summary.bytes, e.connect + e.read + e.write + e.timeout,
    e.status, latency.mean, latency:percentile(99)))
end
