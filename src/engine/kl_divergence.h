// KL-divergence base files in the format llama-perplexity writes with --kl-divergence-base, so
// `ferry ppl --kl-divergence-base FILE` can compare Ferry with llama.cpp (or with an earlier
// Ferry run) on the same tokens. Layout (little-endian):
//   "_logits_" | u32 n_ctx | i32 n_vocab | i32 n_chunk | i32 tokens[n_chunk * n_ctx]
//   then per window, for each scored position (n_ctx - 1 - n_ctx/2 of them), one row of
//   nv = 2 * ((n_vocab + 1) / 2) + 4 u16: f32 scale, f32 min_log_prob, then n_vocab u16 q with
//   log p[i] = scale * q[i] + min_log_prob (log-probs within 16 nats of the top one; q 0 below).
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace ferry {

struct KlBaseHeader {
  uint32_t n_ctx = 0;
  int32_t n_vocab = 0, n_chunk = 0;
  std::vector<int32_t> tokens;  // [n_chunk * n_ctx] the evaluated text (first tokens not replaced)
};

// Percentiles of per-position values as llama-perplexity reports them: over the sorted values,
// linear interpolation at fraction * (n - 1); the median is the mean of the two middle values
// when n is even.
struct Percentiles {
  double min = 0, p0_1 = 0, p1 = 0, p5 = 0, p10 = 0, p25 = 0, median = 0, p75 = 0, p90 = 0, p95 = 0, p99 = 0,
         p99_9 = 0, max = 0;
};
// values: any order; sorted in place. Empty: all zeros.
Percentiles PercentilesOf(std::vector<float>& values);

// What a run's distributions differ from the base's by, over every scored position.
struct KlDivergenceResult {
  int64_t count = 0;
  double mean_kld = 0, kld_stderr = 0;         // KL(base || run), nats
  Percentiles kld;                             // of the per-position KL divergences
  double top1_agreement = 0, top1_stderr = 0;  // fraction of positions with the same top token
  // dp: the run's probability of the token that follows minus the base's (llama.cpp's "Δp").
  double mean_dp = 0, dp_stderr = 0;
  double rms_dp = 0, rms_dp_stderr = 0;
  Percentiles dp;
  double ppl = 0, ppl_base = 0;  // this run's and the base's perplexity over the positions
  double delta_ppl() const { return ppl - ppl_base; }
};

class KlBaseWriter {
 public:
  static StatusOr<std::unique_ptr<KlBaseWriter>> Create(const std::string& path, const KlBaseHeader& header);
  // logits: [n_rows, n_vocab] f32, the scored rows of a window in order.
  Status AddRows(const float* logits, int32_t n_rows);
  Status Close();

 private:
  std::string path_;
  std::ofstream out_;
  int32_t n_vocab_ = 0;
  std::vector<uint16_t> row_;  // [nv]
};

class KlBaseReader {
 public:
  // Reads the header; errors name the file and the field that is wrong.
  static StatusOr<std::unique_ptr<KlBaseReader>> Open(const std::string& path);
  const KlBaseHeader& header() const { return header_; }
  // Compares the next n_rows base rows with logits [n_rows, n_vocab]; targets[i] is the token
  // row i predicts (for the two perplexities).
  Status CompareRows(const float* logits, const int32_t* targets, int32_t n_rows);
  // Errors unless every row of the file was compared.
  StatusOr<KlDivergenceResult> Finish();

 private:
  std::string path_;
  std::ifstream in_;
  KlBaseHeader header_;
  std::vector<uint16_t> row_;  // [nv]
  int64_t rows_left_ = 0;
  double sum_kld_ = 0, sum_kld2_ = 0, sum_nll_ = 0, sum_nll_base_ = 0;
  double sum_dp_ = 0, sum_dp2_ = 0, sum_dp4_ = 0;
  std::vector<float> klds_, dps_;  // [positions compared] per-position KLD and dp, for percentiles
  int64_t count_ = 0, same_top_ = 0;
};

}  // namespace ferry
