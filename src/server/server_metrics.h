// Server metrics in Prometheus' text exposition format (0.0.4), named as vLLM names them with
// a `ferry:` prefix (or `vllm:`, --metrics-prefix): latency histograms observed per finished sequence, engine
// gauges and counters read from EngineStats at scrape time, and HTTP outcomes.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine_metrics.h"

namespace ferry::server {

// A cumulative histogram: counts[i] = observations <= bounds[i]; +Inf is `count`.
struct Histogram {
  explicit Histogram(std::vector<double> upper_bounds)
      : bounds(std::move(upper_bounds)), counts(bounds.size(), 0) {}
  void Observe(double v);
  std::vector<double> bounds;
  std::vector<uint64_t> counts;  // [bounds.size()]
  uint64_t count = 0;
  double sum = 0;
};

class ServerMetrics {
 public:
  // prefix: the metric names' namespace, "ferry" ("vllm" for dashboards built for vLLM).
  explicit ServerMetrics(std::string model_name, std::string prefix = "ferry");

  // A finished sequence (one branch): latencies, its finish reason ("stop", "length", "abort").
  void ObserveFinished(const RequestMetrics& m, const std::string& finish_reason);
  // An HTTP response status (for ferry:http_requests_total{status=...}).
  void ObserveHttp(int status);

  // The whole /metrics page; `stats` is the engine's state now.
  std::string Render(const EngineStats& stats) const;

 private:
  std::string model_name_;
  std::string prefix_;
  mutable std::mutex mu_;
  Histogram ttft_, tpot_, itl_, e2e_, queue_, prompt_len_, output_len_;  // guarded by mu_
  std::map<std::string, uint64_t> finished_;                             // by finish reason
  std::map<int, uint64_t> http_;                                         // by status
};

}  // namespace ferry::server
