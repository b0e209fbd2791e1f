// The run-time sparsity flags shared by run, ppl, bench, bench throughput and serve, and the
// report of what they skipped (docs/sparsity.md).
#include <fmt/format.h>

#include <map>

#include "commands.h"

namespace ferry::cli {

void SparsityFlags::Add(CLI::App* cmd) {
  SparsityOptions& o = options;
  cmd->add_option("--moe-capacity-factor", o.moe_capacity_factor,
                  "MoE: expert capacity = ceil(k*F*tokens/experts), assignments past it dropped (0: exact)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->group("Sparsity");
  static const std::map<std::string, KvPolicy> kPolicies = {
      {"full", KvPolicy::kFull}, {"sink", KvPolicy::kSink}, {"h2o", KvPolicy::kH2O}};
  cmd->add_option("--kv-policy", o.kv_policy,
                  "KV per sequence: full | sink (StreamingLLM) | h2o (heavy hitters)")
      ->transform(CLI::CheckedTransformer(kPolicies, CLI::ignore_case))
      ->group("Sparsity");
  cmd->add_option("--kv-budget", o.kv_budget,
                  "tokens of KV kept per sequence between forward passes (sink/h2o)")
      ->check(CLI::PositiveNumber)
      ->group("Sparsity");
  cmd->add_option("--sink-tokens", o.sink_tokens, "first tokens never evicted")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->group("Sparsity");
  cmd->add_option("--recent-window", o.recent_window,
                  "newest tokens never evicted (default: sink budget-sinks, h2o half of that)")
      ->check(CLI::NonNegativeNumber)
      ->group("Sparsity");
  cmd->add_option("--ffn-sparsity", o.ffn_sparsity,
                  "FFN: fraction of neurons skipped per token (thresholds from --ffn-stats, or the "
                  "--ffn-predictor's kept fraction; 0: exact)")
      ->check(CLI::Range(0.0, 0.99))
      ->group("Sparsity");
  cmd->add_option("--ffn-stats", o.ffn_stats, "FFN: thresholds file from `ferry sparsify` (threshold mode)")
      ->check(CLI::ExistingFile)
      ->group("Sparsity");
  cmd->add_option(
         "--ffn-predictor", o.ffn_predictor,
         "FFN: predictor file from `ferry sparsify` (predictor mode; default sparsity: the trained one)")
      ->check(CLI::ExistingFile)
      ->group("Sparsity");
}

Status SparsityFlags::CheckSupportedByEngine() const {
  if (options.UsesKvBudget())
    return UnsupportedError(
        "--kv-policy {} is not supported by the batching engine yet (its scheduler allocates KV "
        "by position); use it with ferry run, ppl or bench",
        KvPolicyName(options.kv_policy));
  return Status::Ok();
}

std::string SparsityReport(const Model& model) {
  const SparsityStats& s = model.sparsity_stats();
  std::string out;
  if (model.config().IsMoe()) {
    out += fmt::format("MoE: {} expert assignments, {} dropped ({:.2f}%), load per expert [",
                       s.moe_assignments, s.moe_dropped, 100.0 * s.MoeDropRate());
    for (size_t e = 0; e < s.expert_load.size(); ++e)
      out += fmt::format("{}{}", e ? " " : "", s.expert_load[e]);
    out += "]";
  }
  if (model.sparsity().UsesKvBudget()) {
    out += fmt::format(
        "{}KV {} budget {}: {} tokens evicted, peak KV {:.2f} MiB vs {:.2f} MiB full ({:.1f}% saved)",
        out.empty() ? "" : "; ", KvPolicyName(model.sparsity().kv_policy), model.sparsity().kv_budget,
        s.kv_evicted_tokens, s.kv_peak_bytes / 1048576.0, s.kv_full_bytes / 1048576.0,
        s.kv_full_bytes > 0 ? 100.0 * (1.0 - static_cast<double>(s.kv_peak_bytes) / s.kv_full_bytes) : 0.0);
  }
  if (model.sparsity().UsesFfnSparsity()) {
    out += fmt::format(
        "{}FFN {}: {:.2f}% of neurons skipped ({} of {}; {} of {} tokens row-sparse)",
        out.empty() ? "" : "; ", model.sparsity().ffn_predictor.empty() ? "threshold" : "predictor",
        100.0 * s.FfnSkippedFraction(), s.ffn_skipped, s.ffn_neurons, s.ffn_sparse_tokens, s.ffn_tokens);
  }
  return out;
}

nlohmann::json SparsityJson(const Model& model) {
  const SparsityStats& s = model.sparsity_stats();
  const SparsityOptions& o = model.sparsity();
  nlohmann::json j = nlohmann::json::object();
  if (model.config().IsMoe()) {
    j["moe"] = {{"n_expert", model.config().n_expert},
                {"n_expert_used", model.config().n_expert_used},
                {"capacity_factor", o.moe_capacity_factor},
                {"assignments", s.moe_assignments},
                {"dropped", s.moe_dropped},
                {"drop_rate", s.MoeDropRate()},
                {"expert_load", s.expert_load},
                {"expert_dropped", s.expert_dropped}};
  }
  if (o.UsesKvBudget()) {
    j["kv"] = {{"policy", KvPolicyName(o.kv_policy)},
               {"budget", o.kv_budget},
               {"sink_tokens", o.sink_tokens},
               {"recent_window", o.recent_window},
               {"evicted_tokens", s.kv_evicted_tokens},
               {"peak_bytes", s.kv_peak_bytes},
               {"full_bytes", s.kv_full_bytes},
               {"saved_fraction",
                s.kv_full_bytes > 0 ? 1.0 - static_cast<double>(s.kv_peak_bytes) / s.kv_full_bytes : 0.0}};
  }
  if (o.UsesFfnSparsity()) {
    j["ffn"] = {{"mode", o.ffn_predictor.empty() ? "threshold" : "predictor"},
                {"requested_sparsity", o.ffn_sparsity},
                {"neurons", s.ffn_neurons},
                {"skipped", s.ffn_skipped},
                {"effective_sparsity", s.FfnSkippedFraction()},
                {"tokens", s.ffn_tokens},
                {"row_sparse_tokens", s.ffn_sparse_tokens}};
  }
  return j;
}

}  // namespace ferry::cli
