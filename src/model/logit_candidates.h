// LogitCandidates: what an output head split by vocabulary gathers for a row whose sampler
// needs only the K largest logits (greedy: K = 1; top-k sampling: K = top_k) instead of the
// whole row. Each rank reduces its shard of the row to its K largest (logit, token) pairs;
// the pairs of every rank, merged in rank order (= increasing token order), give the row's K
// largest, ordered and tie-broken exactly as the sampler orders the whole row (larger logit
// first, then the lower token id), so sampling from them picks the same token.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ferry {

struct LogitCandidate {
  float logit;
  int32_t token;  // id in the whole vocabulary
};
static_assert(sizeof(LogitCandidate) == 8, "candidates travel as raw bytes between ranks");

// How many candidates a shard of `shard_vocab` rows sends for a row that needs k: all of its
// rows when it has fewer than k.
inline int64_t ShardCandidateCount(int32_t k, int64_t shard_vocab) {
  return k < shard_vocab ? k : shard_vocab;
}

// The ShardCandidateCount(k, n) largest of logits [n] (token ids token0..token0 + n - 1), larger
// logit first and the lower token on ties, into out [ShardCandidateCount(k, n)]. k > 0.
void ShardTopK(const float* logits, int64_t n, int64_t token0, int32_t k, LogitCandidate* out);

// The k largest of the shards' candidates, in the same order: shards[r] is rank r's ShardTopK
// output, ranks in order (so that equal logits keep the lower token first). *merged is
// replaced; it has fewer than k entries only when the shards hold fewer.
void MergeShardCandidates(std::span<const std::span<const LogitCandidate>> shards, int32_t k,
                          std::vector<LogitCandidate>* merged);

// row [n_vocab]: -inf everywhere but at the candidates' tokens, which get their logits. The
// sampler, greedy or top-k with k <= candidates.size(), picks from it what it picks from the
// whole row (nothing outside the K largest can be chosen).
void ScatterCandidates(std::span<const LogitCandidate> candidates, float* row, int64_t n_vocab);

}  // namespace ferry
