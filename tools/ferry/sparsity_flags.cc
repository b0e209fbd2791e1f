// The run-time sparsity flags shared by run, ppl, bench, bench throughput and serve, and the
// report of what they skipped (docs/sparsity.md).
#include <fmt/format.h>

#include <map>

#include "commands.h"
#include "model/kv_budget_policy.h"

namespace ferry::cli {
namespace {

// Attention sparsity (item 4: head pruning, value-fetch skipping, progressive precision).
void AddAttentionFlags(CLI::App* cmd, SparsityOptions& o) {
  cmd->add_option("--prune-heads", o.prune_heads,
                  "drop this fraction of each layer's attention heads, least important first (needs "
                  "--head-importance)")
      ->check(CLI::Range(0.0, 0.999))
      ->group("Sparsity");
  cmd->add_option("--head-importance", o.head_importance,
                  "per-head importance for --prune-heads: a STATS file of `ferry calibrate`")
      ->group("Sparsity");
  cmd->add_option("--attn-skip-threshold", o.attn_skip_threshold,
                  "attention: V rows whose softmax weight is below T are not read (0: exact)")
      ->check(CLI::Range(0.0, 0.999))
      ->group("Sparsity");
  cmd->add_flag("--attn-progressive", o.attn_progressive,
                "attention scores from an INT8 copy of K, recomputed in f32 near the max")
      ->group("Sparsity");
  cmd->add_option("--attn-progressive-margin", o.attn_progressive_margin,
                  "--attn-progressive: keys whose INT8 score is within this many logits of the max are "
                  "recomputed in f32")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->group("Sparsity");
}

double Fraction(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

std::string AttentionReport(const SparsityOptions& o, const SparsityStats& s) {
  std::string out;
  auto sep = [&] { return out.empty() ? "" : "; "; };
  if (o.UsesHeadPruning())
    out += fmt::format(
        "heads pruned {} (and {} KV heads): {:.1f}% of attention FLOPs and {:.1f}% of attention weight bytes "
        "skipped",
        s.heads_pruned, s.kv_heads_pruned, 100.0 * Fraction(s.prune_flops_skipped, s.prune_flops),
        100.0 * Fraction(s.prune_weight_bytes_skipped, s.prune_weight_bytes));
  if (o.attn_skip_threshold > 0)
    out += fmt::format("{}V rows skipped: {:.2f} of {:.2f} MiB not read ({:.1f}%)", sep(),
                       s.attn_v_bytes_skipped / 1048576.0, s.attn_v_bytes / 1048576.0,
                       100.0 * Fraction(s.attn_v_bytes_skipped, s.attn_v_bytes));
  if (o.attn_progressive)
    out += fmt::format("{}progressive K: {:.1f}% of rows recomputed in f32, K bytes read {:.1f}% of dense",
                       sep(), 100.0 * Fraction(s.attn_k_rows_f32, s.attn_k_rows),
                       100.0 * Fraction(s.attn_k_bytes_read, s.attn_k_bytes_dense));
  return out;
}

nlohmann::json AttentionJson(const SparsityOptions& o, const SparsityStats& s) {
  nlohmann::json j = nlohmann::json::object();
  if (o.UsesHeadPruning())
    j["prune_heads"] = {
        {"fraction", o.prune_heads},
        {"heads_pruned", s.heads_pruned},
        {"kv_heads_pruned", s.kv_heads_pruned},
        {"flops", s.prune_flops},
        {"flops_skipped", s.prune_flops_skipped},
        {"flops_saved_fraction", Fraction(s.prune_flops_skipped, s.prune_flops)},
        {"weight_bytes", s.prune_weight_bytes},
        {"weight_bytes_skipped", s.prune_weight_bytes_skipped},
        {"weight_bytes_saved_fraction", Fraction(s.prune_weight_bytes_skipped, s.prune_weight_bytes)}};
  if (o.attn_skip_threshold > 0)
    j["value_skip"] = {{"threshold", o.attn_skip_threshold},
                       {"v_bytes", s.attn_v_bytes},
                       {"v_bytes_skipped", s.attn_v_bytes_skipped},
                       {"saved_fraction", Fraction(s.attn_v_bytes_skipped, s.attn_v_bytes)}};
  if (o.attn_progressive)
    j["progressive"] = {{"margin", o.attn_progressive_margin},
                        {"k_rows", s.attn_k_rows},
                        {"k_rows_recomputed", s.attn_k_rows_f32},
                        {"recompute_fraction", Fraction(s.attn_k_rows_f32, s.attn_k_rows)},
                        {"k_bytes_dense", s.attn_k_bytes_dense},
                        {"k_bytes_read", s.attn_k_bytes_read},
                        {"k_bytes_read_fraction", Fraction(s.attn_k_bytes_read, s.attn_k_bytes_dense)}};
  return j;
}

}  // namespace

void SparsityFlags::Add(CLI::App* cmd) {
  SparsityOptions& o = options;
  AddAttentionFlags(cmd, o);
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
  // The engine runs KV budgets (docs/sparsity.md, "KV budgets in the serving engine"); flags
  // that do not fit together fail here, before the model loads. The engine itself refuses
  // speculative decoding and n > 1 with a budget.
  return KvBudgetFromOptions(options).status();
}

std::string SparsityReport(const Model& model, const SparsityStats& s) {
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
  if (std::string a = AttentionReport(model.sparsity(), s); !a.empty()) out += (out.empty() ? "" : "; ") + a;
  if (model.sparsity().UsesFfnSparsity()) {
    out += fmt::format(
        "{}FFN {}: {:.2f}% of neurons skipped ({} of {}; {} of {} tokens row-sparse)",
        out.empty() ? "" : "; ", model.sparsity().ffn_predictor.empty() ? "threshold" : "predictor",
        100.0 * s.FfnSkippedFraction(), s.ffn_skipped, s.ffn_neurons, s.ffn_sparse_tokens, s.ffn_tokens);
  }
  return out;
}

nlohmann::json SparsityJson(const Model& model, const SparsityStats& s) {
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
  if (nlohmann::json a = AttentionJson(o, s); !a.empty()) j["attention"] = std::move(a);
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
