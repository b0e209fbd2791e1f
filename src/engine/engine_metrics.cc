#include "engine/engine_metrics.h"

#include <algorithm>
#include <cmath>

namespace ferry {

const char* FinishReason(RequestStatus s) {
  switch (s) {
    case RequestStatus::kFinishedStop: return "stop";
    case RequestStatus::kFinishedLength: return "length";
    case RequestStatus::kFinishedAbort: return "abort";
    default: return "";
  }
}

RequestMetrics ComputeRequestMetrics(const Request& r) {
  RequestMetrics m;
  const RequestTimes& t = r.times;
  m.prompt_tokens = r.num_prompt_tokens;
  m.output_tokens = r.num_output();
  m.cached_prompt_tokens = std::max(0, r.num_cached_prompt_tokens);
  m.preemptions = r.num_preemptions;
  m.spec_draft_tokens = r.spec.num_drafted;
  m.spec_accepted_tokens = r.spec.num_accepted;
  m.arrival_s = t.arrival;
  m.queue_s = t.first_scheduled >= 0 ? t.first_scheduled - t.arrival : 0.0;
  if (m.output_tokens > 0 && t.first_token >= 0) {
    m.ttft_s = t.first_token - t.arrival;
    m.tpot_s = m.output_tokens > 1 ? (t.last_token - t.first_token) / (m.output_tokens - 1) : 0.0;
    m.e2e_s = m.ttft_s + m.tpot_s * (m.output_tokens - 1);
  }
  m.itl_s = t.inter_token;
  return m;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank)), hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

}  // namespace ferry
