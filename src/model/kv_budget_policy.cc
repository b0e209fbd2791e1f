#include "model/kv_budget_policy.h"

#include <algorithm>

namespace ferry {

const char* KvPolicyName(KvPolicy p) {
  switch (p) {
    case KvPolicy::kFull:
      return "full";
    case KvPolicy::kSink:
      return "sink";
    case KvPolicy::kH2O:
      return "h2o";
  }
  return "?";
}

int32_t KvBudgetConfig::Recent() const {
  if (recent_window >= 0) return std::min(recent_window, budget);
  const int32_t rest = std::max(0, budget - sink_tokens);
  return policy == KvPolicy::kH2O ? rest / 2 : rest;
}

int32_t KvBudgetConfig::Heavy() const {
  return policy == KvPolicy::kH2O ? std::max(0, budget - sink_tokens - Recent()) : 0;
}

Status KvBudgetConfig::Validate() const {
  if (policy == KvPolicy::kFull) return InvalidArgumentError("--kv-policy full keeps every token: no budget");
  if (budget <= 0)
    return InvalidArgumentError("--kv-budget must be positive with --kv-policy {}", KvPolicyName(policy));
  if (sink_tokens < 0 || sink_tokens + Recent() > budget)
    return InvalidArgumentError("--sink-tokens {} + --recent-window {} exceed --kv-budget {}", sink_tokens,
                                Recent(), budget);
  return Status::Ok();
}

StatusOr<std::optional<KvBudgetConfig>> KvBudgetFromOptions(const SparsityOptions& o) {
  if (o.kv_policy != KvPolicy::kFull && o.kv_budget <= 0)
    return InvalidArgumentError("--kv-policy {} needs --kv-budget N (tokens kept per sequence)",
                                KvPolicyName(o.kv_policy));
  if (o.kv_policy == KvPolicy::kFull && o.kv_budget > 0)
    return InvalidArgumentError("--kv-budget {} needs --kv-policy sink or h2o (full keeps every token)",
                                o.kv_budget);
  if (!o.UsesKvBudget()) return std::optional<KvBudgetConfig>();
  KvBudgetConfig c;
  c.policy = o.kv_policy;
  c.budget = o.kv_budget;
  c.sink_tokens = o.sink_tokens;
  c.recent_window = o.recent_window;
  FERRY_RETURN_IF_ERROR(c.Validate());
  return std::optional<KvBudgetConfig>(c);
}

void KeptTokens::Append(int32_t p0, int32_t len) {
  for (int32_t p = p0; p < p0 + len; ++p) pos.push_back(p);
  score.resize(pos.size(), 0.0f);
}

std::vector<SlotMove> EvictOverBudget(KeptTokens& kept, int32_t next_pos, const KvBudgetConfig& config) {
  std::vector<SlotMove> moves;
  const int32_t n = kept.size();
  if (n <= config.budget) return moves;
  const int32_t recent_from = next_pos - config.Recent();
  std::vector<uint8_t> keep(static_cast<size_t>(n), 0);  // [n]
  std::vector<int32_t> candidates;                       // slots neither sink nor recent
  for (int32_t i = 0; i < n; ++i) {
    const int32_t p = kept.pos[static_cast<size_t>(i)];
    if (p < config.sink_tokens || p >= recent_from) {
      keep[static_cast<size_t>(i)] = 1;
    } else {
      candidates.push_back(i);
    }
  }
  const size_t heavy = std::min(candidates.size(), static_cast<size_t>(config.Heavy()));
  // Heaviest first; equal scores: the newer token.
  std::partial_sort(
      candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(heavy), candidates.end(),
      [&](int32_t a, int32_t b) {
        const float sa = kept.score[static_cast<size_t>(a)], sb = kept.score[static_cast<size_t>(b)];
        return sa != sb ? sa > sb : kept.pos[static_cast<size_t>(a)] > kept.pos[static_cast<size_t>(b)];
      });
  for (size_t c = 0; c < heavy; ++c) keep[static_cast<size_t>(candidates[c])] = 1;
  const int32_t new_n = static_cast<int32_t>(std::count(keep.begin(), keep.end(), 1));
  // Fill the holes below new_n with the last kept slots above it.
  int32_t hole = 0, mover = n - 1;
  while (true) {
    while (hole < new_n && keep[static_cast<size_t>(hole)]) ++hole;
    while (mover >= new_n && !keep[static_cast<size_t>(mover)]) --mover;
    if (hole >= new_n || mover < new_n) break;
    moves.push_back({mover, hole});
    kept.pos[static_cast<size_t>(hole)] = kept.pos[static_cast<size_t>(mover)];
    kept.score[static_cast<size_t>(hole)] = kept.score[static_cast<size_t>(mover)];
    keep[static_cast<size_t>(hole)] = 1;
    keep[static_cast<size_t>(mover)] = 0;
  }
  kept.pos.resize(static_cast<size_t>(new_n));
  kept.score.resize(static_cast<size_t>(new_n));
  return moves;
}

}  // namespace ferry
