#include "server/server_metrics.h"

#include <fmt/format.h>

#include <algorithm>

namespace ferry::server {
namespace {

// vLLM's bucket bounds for the same histograms.
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                          0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                          20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kTpotBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                          0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kLatencyBuckets = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                             5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                             60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
std::vector<double> TokenBuckets() {  // 1, 2, 5, 10, 20, 50, ... up to 1e6
  std::vector<double> b;
  for (double scale = 1; scale <= 1e6; scale *= 10)
    for (double m : {1.0, 2.0, 5.0})
      if (m * scale <= 1e6) b.push_back(m * scale);
  return b;
}

std::string Num(double v) {
  return fmt::format("{}", v);
}

}  // namespace

void Histogram::Observe(double v) {
  for (size_t i = 0; i < bounds.size(); ++i)
    if (v <= bounds[i]) ++counts[i];
  ++count;
  sum += v;
}

ServerMetrics::ServerMetrics(std::string model_name, std::string prefix)
    : model_name_(std::move(model_name)),
      prefix_(std::move(prefix)),
      ttft_(kTtftBuckets),
      tpot_(kTpotBuckets),
      itl_(kTpotBuckets),
      e2e_(kLatencyBuckets),
      queue_(kLatencyBuckets),
      prompt_len_(TokenBuckets()),
      output_len_(TokenBuckets()) {}

void ServerMetrics::ObserveFinished(const RequestMetrics& m, const std::string& finish_reason) {
  std::lock_guard<std::mutex> l(mu_);
  ++finished_[finish_reason];
  prompt_len_.Observe(m.prompt_tokens);
  output_len_.Observe(m.output_tokens);
  queue_.Observe(m.queue_s);
  if (m.output_tokens == 0) return;  // no token: no latencies to report
  ttft_.Observe(m.ttft_s);
  if (m.output_tokens > 1) tpot_.Observe(m.tpot_s);
  for (double gap : m.itl_s) itl_.Observe(gap);
  e2e_.Observe(m.e2e_s);
}

void ServerMetrics::ObserveHttp(int status) {
  std::lock_guard<std::mutex> l(mu_);
  ++http_[status];
}

std::string ServerMetrics::Render(const EngineStats& s) const {
  const std::string label = fmt::format("model_name=\"{}\"", model_name_);
  std::string out;
  auto family = [&](const std::string& name, const char* type, const char* help) {
    out += fmt::format("# HELP {}:{} {}\n# TYPE {}:{} {}\n", prefix_, name, help, prefix_, name, type);
  };
  auto sample = [&](const std::string& name, double v, const std::string& extra = "") {
    out += fmt::format("{}:{}{{{}{}}} {}\n", prefix_, name, label, extra, Num(v));
  };
  auto gauge = [&](const char* name, double v, const char* help) {
    family(name, "gauge", help);
    sample(name, v);
  };
  auto counter = [&](const char* name, double v, const char* help) {
    family(name, "counter", help);
    sample(name, v);
  };
  gauge("num_requests_running", s.running, "Number of sequences running in the engine's batch.");
  gauge("num_requests_waiting", s.waiting, "Number of requests waiting to be scheduled.");
  gauge("kv_cache_usage_perc", s.kv_usage, "KV-cache usage: fraction of blocks in use (1 = 100 percent).");
  gauge("kv_cache_used_blocks", s.kv_blocks - s.kv_free_blocks,
        "KV-cache blocks referenced by some sequence.");
  gauge("kv_cache_total_blocks", s.kv_blocks, "KV-cache blocks in all.");
  counter("prefix_cache_queries_total", static_cast<double>(s.prefix_query_tokens),
          "Prompt tokens looked up in the prefix cache.");
  counter("prefix_cache_hits_total", static_cast<double>(s.prefix_hit_tokens),
          "Prompt tokens found in the prefix cache.");
  // The prefix cache's RAM and disk tiers (--prefix-cache-ram, --prefix-cache-dir).
  gauge("prefix_cache_ram_bytes", static_cast<double>(s.prefix_cache_ram_bytes),
        "Bytes of evicted KV blocks held in the prefix cache's host-RAM tier.");
  gauge("prefix_cache_disk_bytes", static_cast<double>(s.prefix_cache_disk_bytes),
        "Bytes of KV block files in the prefix cache's disk tier.");
  family("prefix_cache_tier_hits_total", "counter", "KV blocks restored from a prefix-cache tier, by tier.");
  sample("prefix_cache_tier_hits_total", static_cast<double>(s.prefix_cache_ram_hits), ",tier=\"ram\"");
  sample("prefix_cache_tier_hits_total", static_cast<double>(s.prefix_cache_disk_hits), ",tier=\"disk\"");
  counter("prefix_cache_disk_rejected_total", static_cast<double>(s.prefix_cache_disk_rejected),
          "Prefix-cache disk files found truncated, corrupt or foreign and deleted.");
  counter("num_preemptions_total", static_cast<double>(s.preemptions), "Cumulative number of preemptions.");
  // KV budgets (--kv-policy sink|h2o): evictions and the peak blocks held, next to the peak
  // that full caches of the same positions would have held.
  counter("kv_evicted_tokens_total", static_cast<double>(s.kv_evicted_tokens),
          "Tokens evicted from KV caches by the KV budget policy.");
  gauge("kv_cache_peak_used_blocks", static_cast<double>(s.kv_peak_blocks),
        "Most KV-cache blocks in use at any step.");
  gauge("kv_cache_peak_full_blocks", static_cast<double>(s.kv_peak_full_blocks),
        "Most KV-cache blocks full (unbudgeted, unshared) caches would have held at any step.");
  counter("prompt_tokens_total", static_cast<double>(s.prompt_tokens), "Number of prefill tokens processed.");
  counter("generation_tokens_total", static_cast<double>(s.output_tokens),
          "Number of generation tokens processed.");
  // Speculative decoding (vLLM's spec_decode_* names); zero when the engine does not speculate.
  counter("spec_decode_num_drafts_total", static_cast<double>(s.spec_verifications),
          "Verification passes over drafted tokens.");
  counter("spec_decode_num_draft_tokens_total", static_cast<double>(s.spec_draft_tokens), "Drafted tokens verified.");
  counter("spec_decode_num_accepted_tokens_total", static_cast<double>(s.spec_accepted_tokens),
          "Drafted tokens accepted.");
  counter("spec_decode_draft_seconds_total", s.spec_draft_s, "Seconds spent drafting.");
  counter("spec_decode_verify_seconds_total", s.spec_verify_s, "Seconds spent verifying drafts.");

  std::lock_guard<std::mutex> l(mu_);
  family("request_success_total", "counter", "Count of finished sequences by finish reason.");
  for (const char* reason : {"stop", "length", "abort"}) {
    auto it = finished_.find(reason);
    sample("request_success_total", it == finished_.end() ? 0.0 : static_cast<double>(it->second),
           fmt::format(",finished_reason=\"{}\"", reason));
  }
  auto histogram = [&](const char* name, const Histogram& h, const char* help) {
    family(name, "histogram", help);
    for (size_t i = 0; i < h.bounds.size(); ++i)
      sample(fmt::format("{}_bucket", name), static_cast<double>(h.counts[i]),
             fmt::format(",le=\"{}\"", Num(h.bounds[i])));
    sample(fmt::format("{}_bucket", name), static_cast<double>(h.count), ",le=\"+Inf\"");
    sample(fmt::format("{}_sum", name), h.sum);
    sample(fmt::format("{}_count", name), static_cast<double>(h.count));
  };
  histogram("time_to_first_token_seconds", ttft_, "Histogram of time to first token in seconds.");
  histogram("time_per_output_token_seconds", tpot_, "Histogram of time per output token in seconds.");
  histogram("inter_token_latency_seconds", itl_, "Histogram of inter-token latency in seconds.");
  histogram("e2e_request_latency_seconds", e2e_, "Histogram of end to end request latency in seconds.");
  histogram("request_queue_time_seconds", queue_, "Histogram of time spent waiting in the queue in seconds.");
  histogram("request_prompt_tokens", prompt_len_, "Number of prefill tokens processed (per sequence).");
  histogram("request_generation_tokens", output_len_,
            "Number of generation tokens processed (per sequence).");
  family("http_requests_total", "counter", "HTTP responses by status code.");
  for (const auto& [status, n] : http_)
    sample("http_requests_total", static_cast<double>(n), fmt::format(",status=\"{}\"", status));
  return out;
}

}  // namespace ferry::server
