#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "base/check.h"
#include "base/log.h"

namespace ferry {

int32_t ArgMax(const float* logits, int32_t n) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

int32_t LogitsTopKNeeded(const SamplingParams& p) {
  const bool repeat = p.repeat_penalty != 1.0f && p.repeat_last_n != 0;
  const bool openai = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  // Each can lift a token from outside the K largest raw logits (or ban one inside them).
  if (p.constraint || !p.constraints.empty() || repeat || openai) return 0;
  if (p.temperature <= 0.0f) return 1;
  return p.top_k > 0 && p.top_k <= kMaxGatheredTopK ? p.top_k : 0;
}

namespace {

uint64_t ResolveSeed(uint64_t seed) {
  if (seed != SamplingParams{}.seed) return seed;
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

// The request's logit constraints, then penalties over the recent history. repeat_penalty follows llama.cpp
// (divide positive logits, multiply negative ones); presence/frequency follow OpenAI (subtract), counted past
// the first prompt_tokens tokens.
void ApplyConstraintsAndPenalties(const SamplingParams& p, float* logits, int32_t n_vocab,
                                  std::span<const int32_t> history) {
  if (!p.constraints.empty()) {
    const size_t prompt = std::min(history.size(), static_cast<size_t>(std::max(p.prompt_tokens, 0)));
    ApplyLogitsConstraints(p.constraints, logits, n_vocab, history.subspan(prompt));
  }
  bool repeat = p.repeat_penalty != 1.0f && p.repeat_last_n != 0;
  bool openai = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  if (!repeat && !openai) return;
  size_t window = history.size();
  if (p.repeat_last_n > 0) window = std::min(window, static_cast<size_t>(p.repeat_last_n));
  const size_t window_start = history.size() - window;
  const size_t openai_start =
      std::max(window_start, std::min(history.size(), static_cast<size_t>(std::max(p.prompt_tokens, 0))));
  // token -> (occurrences in the window, occurrences in the window past the prompt)
  std::unordered_map<int32_t, std::pair<int, int>> counts;
  for (size_t i = window_start; i < history.size(); ++i) {
    auto& c = counts[history[i]];
    ++c.first;
    c.second += i >= openai_start ? 1 : 0;
  }
  for (const auto& [tok, count] : counts) {
    if (tok < 0 || tok >= n_vocab) continue;
    float& l = logits[tok];
    if (repeat) l = l > 0 ? l / p.repeat_penalty : l * p.repeat_penalty;
    if (count.second > 0) l -= static_cast<float>(count.second) * p.frequency_penalty + p.presence_penalty;
  }
}

}  // namespace

Sampler::Sampler(const SamplingParams& params, int32_t n_vocab)
    : params_(params), n_vocab_(n_vocab), rng_(ResolveSeed(params.seed)) {
  candidates_.reserve(static_cast<size_t>(n_vocab));
  if (params_.constraint) {
    matcher_.emplace(params_.constraint);
    mask_.resize(matcher_->mask_words());
  }
}

void Sampler::ApplyConstraint(float* logits, std::span<const int32_t> history) {
  if (!matcher_) return;
  if (prompt_len_ < 0) prompt_len_ = static_cast<int64_t>(history.size());
  std::span<const int32_t> generated = history.size() > static_cast<size_t>(prompt_len_)
                                           ? history.subspan(static_cast<size_t>(prompt_len_))
                                           : std::span<const int32_t>();
  if (!params_.constraint_triggers.empty()) {
    const auto& triggers = params_.constraint_triggers;
    size_t from = SIZE_MAX;  // no trigger yet
    for (size_t i = 0; i < generated.size() && from == SIZE_MAX; ++i)
      if (std::find(triggers.begin(), triggers.end(), generated[i]) != triggers.end()) from = i + 1;
    if (from != constrained_from_) {  // a trigger appeared, or a rollback took it away
      matcher_->Rollback(static_cast<int32_t>(consumed_.size()));
      consumed_.clear();
      constrained_from_ = from;
    }
    if (from == SIZE_MAX) return;  // free until the trigger
    generated = generated.subspan(from);
  }
  size_t common = 0;
  while (common < consumed_.size() && common < generated.size() && consumed_[common] == generated[common])
    ++common;
  matcher_->Rollback(static_cast<int32_t>(consumed_.size() - common));
  consumed_.resize(common);
  bool refused = false;
  for (size_t i = common; i < generated.size(); ++i) {
    if (!matcher_->AcceptToken(generated[i])) {
      refused = true;
      break;
    }
    consumed_.push_back(generated[i]);
  }
  if (!refused) matcher_->FillMask(mask_);
  // Checked after the mask: the walk that fills it can itself pass the parse limit, and a
  // mask from a partial walk must not be sampled from.
  if (!refused && matcher_->overflowed()) {
    refused = true;
    if (!overflow_reported_)
      Log(LogLevel::kWarn,
          "constraint: the grammar keeps more than {} parses alive at once (ambiguous repeats or "
          "alternatives), so the output ends here; make each repeat and alternative unambiguous",
          constraint::StackMachine::kMaxStacks);
    overflow_reported_ = true;
  }
  if (refused) {
    std::fill(mask_.begin(), mask_.end(), 0);
    for (int32_t t : matcher_->grammar().vocab().end_tokens())
      mask_[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63);
  }
  const float kNone = -std::numeric_limits<float>::infinity();
  int32_t n = std::min(n_vocab_, matcher_->grammar().vocab().size());
  for (int32_t t = 0; t < n; ++t)
    if (!((mask_[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1)) logits[t] = kNone;
  for (int32_t t = n; t < n_vocab_; ++t) logits[t] = kNone;  // padding rows past the vocabulary
}

int32_t Sampler::Sample(float* logits, std::span<const int32_t> history) {
  ApplyConstraint(logits, history);  // the grammar first: a token it forbids stays forbidden
  ApplyConstraintsAndPenalties(params_, logits, n_vocab_, history);
  if (params_.temperature <= 0.0f) return ArgMax(logits, n_vocab_);
  Filter(logits);
  std::discrete_distribution<size_t> dist(weights_.begin(), weights_.end());
  return candidates_[dist(rng_)].second;
}

void Sampler::ProcessedProbs(float* logits, std::span<const int32_t> history, std::span<float> probs) {
  FERRY_CHECK(static_cast<int32_t>(probs.size()) == n_vocab_);
  ApplyConstraint(logits, history);  // the grammar first: a token it forbids stays forbidden
  ApplyConstraintsAndPenalties(params_, logits, n_vocab_, history);
  std::fill(probs.begin(), probs.end(), 0.0f);
  if (params_.temperature <= 0.0f) {
    probs[static_cast<size_t>(ArgMax(logits, n_vocab_))] = 1.0f;
    return;
  }
  Filter(logits);
  double sum = 0;
  for (double w : weights_) sum += w;
  for (size_t i = 0; i < candidates_.size(); ++i)
    probs[static_cast<size_t>(candidates_[i].second)] = static_cast<float>(weights_[i] / sum);
}

int32_t Sampler::SampleFromProbs(std::span<const float> probs) {
  FERRY_CHECK(static_cast<int32_t>(probs.size()) == n_vocab_);
  double sum = 0;
  for (float p : probs) sum += p;
  FERRY_CHECK(sum > 0);
  // Inverse CDF over the vocabulary; the last token with mass catches rounding.
  double u = Uniform() * sum, cum = 0;
  int32_t last = -1;
  for (int32_t i = 0; i < n_vocab_; ++i) {
    const float p = probs[static_cast<size_t>(i)];
    if (p <= 0) continue;
    cum += p;
    last = i;
    if (u < cum) return i;
  }
  return last;
}

double Sampler::Uniform() {
  return std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
}

void Sampler::Filter(float* logits) {
  // Order as llama.cpp's default chain: top-k, top-p, min-p, then temperature.
  auto& c = candidates_;
  c.clear();
  for (int32_t i = 0; i < n_vocab_; ++i) c.emplace_back(logits[i], i);
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  size_t k = c.size();
  if (params_.top_k > 0) k = std::min(k, static_cast<size_t>(params_.top_k));
  std::partial_sort(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(k), c.end(), by_logit);
  c.resize(k);

  // Softmax of the (untempered) survivors for top-p / min-p.
  auto probs = [&]() {
    std::vector<float> p(c.size());
    float mx = c[0].first, sum = 0;
    for (size_t i = 0; i < c.size(); ++i) sum += (p[i] = std::exp(c[i].first - mx));
    for (float& v : p) v /= sum;
    return p;
  };
  if (params_.top_p < 1.0f) {
    std::vector<float> p = probs();
    float cum = 0;
    size_t keep = c.size();
    for (size_t i = 0; i < c.size(); ++i) {
      cum += p[i];
      if (cum >= params_.top_p) {
        keep = i + 1;
        break;
      }
    }
    c.resize(keep);
  }
  if (params_.min_p > 0.0f && c.size() > 1) {
    // Keep tokens whose probability is at least min_p times the best one's.
    float threshold = c[0].first + std::log(params_.min_p);
    size_t keep = 1;
    while (keep < c.size() && c[keep].first >= threshold) ++keep;
    c.resize(keep);
  }
  if (!std::isfinite(c[0].first)) c.resize(1);  // constraints banned every token: the first one
  const float mx = std::isfinite(c[0].first) ? c[0].first : 0.0f;
  weights_.resize(c.size());
  for (size_t i = 0; i < c.size(); ++i) weights_[i] = std::exp((c[i].first - mx) / params_.temperature);
}

}  // namespace ferry
