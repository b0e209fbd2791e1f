// KL-divergence base files (llama-perplexity's --kl-divergence-base format): a written file
// reads back, KL(base || run) and top-1 agreement match a direct computation, bad files are
// clear errors.
#include "engine/kl_divergence.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <vector>

#include "test_util.h"

namespace ferry {
namespace {

constexpr int32_t kVocab = 37, kCtx = 8, kChunks = 3;
constexpr int32_t kRows = kChunks * (kCtx - 1 - kCtx / 2);  // scored positions in all

std::vector<float> RandomLogits(uint32_t seed, float spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, spread);
  std::vector<float> l(static_cast<size_t>(kRows) * kVocab);
  for (float& x : l) x = d(rng);
  return l;
}

// KL(p || q) of two logit rows, directly in double.
double Kl(const float* p_logits, const float* q_logits) {
  auto log_softmax = [](const float* l) {
    double mx = l[0], s = 0;
    for (int i = 1; i < kVocab; ++i) mx = std::max(mx, double{l[i]});
    for (int i = 0; i < kVocab; ++i) s += std::exp(l[i] - mx);
    std::vector<double> out(kVocab);
    for (int i = 0; i < kVocab; ++i) out[static_cast<size_t>(i)] = l[i] - mx - std::log(s);
    return out;
  };
  const auto lp = log_softmax(p_logits), lq = log_softmax(q_logits);
  double k = 0;
  for (size_t i = 0; i < lp.size(); ++i) k += std::exp(lp[i]) * (lp[i] - lq[i]);
  return k;
}

KlBaseHeader Header() {
  KlBaseHeader h;
  h.n_ctx = kCtx;
  h.n_vocab = kVocab;
  h.n_chunk = kChunks;
  for (int i = 0; i < kChunks * kCtx; ++i) h.tokens.push_back((i * 7) % kVocab);
  return h;
}

std::string WriteBase(const std::vector<float>& logits) {
  const std::string path = testing::ScratchPath("kl_base.bin");
  auto w = KlBaseWriter::Create(path, Header());
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_TRUE((*w)->AddRows(logits.data(), kRows).ok());
  EXPECT_TRUE((*w)->Close().ok());
  return path;
}

StatusOr<KlDivergenceResult> Compare(const std::string& path, const std::vector<float>& logits) {
  FERRY_ASSIGN_OR_RETURN(auto r, KlBaseReader::Open(path));
  EXPECT_EQ(r->header().tokens, Header().tokens);
  std::vector<int32_t> targets(kRows);
  for (int i = 0; i < kRows; ++i) targets[static_cast<size_t>(i)] = (i * 5) % kVocab;
  // In two parts, as perplexity passes of a smaller batch deliver them.
  FERRY_RETURN_IF_ERROR(r->CompareRows(logits.data(), targets.data(), 5));
  FERRY_RETURN_IF_ERROR(r->CompareRows(logits.data() + 5 * kVocab, targets.data() + 5, kRows - 5));
  return r->Finish();
}

TEST(KlDivergence, SameLogitsGiveZeroAndFullAgreement) {
  const auto base = RandomLogits(1, 2.f);
  auto r = Compare(WriteBase(base), base);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->count, kRows);
  // Only the u16 rounding of the base's log-probs remains: steps of (range / 65535), about
  // 1.5e-4 nats here, leave a floor of a few 1e-6 (measured 3.7e-6).
  EXPECT_LT(std::fabs(r->mean_kld), 1e-5);
  EXPECT_EQ(r->top1_agreement, 1.0);
  EXPECT_NEAR(r->ppl, r->ppl_base, 1e-3 * r->ppl);
}

TEST(KlDivergence, MatchesDirectComputationOnOtherLogits) {
  const auto base = RandomLogits(1, 2.f), run = RandomLogits(2, 2.f);
  auto r = Compare(WriteBase(base), run);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  double want = 0;
  int same = 0;
  for (int i = 0; i < kRows; ++i) {
    const float* b = base.data() + static_cast<size_t>(i) * kVocab;
    const float* q = run.data() + static_cast<size_t>(i) * kVocab;
    want += Kl(b, q);
    same += std::max_element(b, b + kVocab) - b == std::max_element(q, q + kVocab) - q;
  }
  want /= kRows;
  EXPECT_GT(want, 0.5);
  EXPECT_NEAR(r->mean_kld, want, 1e-3 * want);
  EXPECT_DOUBLE_EQ(r->top1_agreement, static_cast<double>(same) / kRows);
  EXPECT_LT(r->top1_agreement, 1.0);
}

// llama-perplexity's percentile: sorted values, linear interpolation at fraction * (n - 1).
TEST(KlDivergence, PercentilesInterpolateAsLlamaPerplexity) {
  std::vector<float> odd = {5, 1, 4, 2, 3};  // sorted 1..5
  const Percentiles p = PercentilesOf(odd);
  EXPECT_EQ(p.min, 1);
  EXPECT_EQ(p.max, 5);
  EXPECT_EQ(p.median, 3);
  EXPECT_FLOAT_EQ(p.p25, 2);     // 0.25 * 4 = 1: the second value
  EXPECT_FLOAT_EQ(p.p10, 1.4);   // 0.4 of the way from 1 to 2
  EXPECT_FLOAT_EQ(p.p99, 4.96);  // 3.96
  EXPECT_FLOAT_EQ(p.p0_1, 1.004);
  EXPECT_FLOAT_EQ(p.p99_9, 4.996);
  std::vector<float> even = {4, 3, 2, 1};
  const Percentiles q = PercentilesOf(even);
  EXPECT_EQ(q.median, 2.5);      // the two middle values' mean
  EXPECT_FLOAT_EQ(q.p75, 3.25);  // 0.75 * 3 = 2.25
  std::vector<float> none;
  EXPECT_EQ(PercentilesOf(none).max, 0);
}

// The per-position statistics llama-perplexity prints beside the mean: KLD percentiles, and the
// change in the probability of the token that follows (mean, RMS, percentiles), against a direct
// computation from the unrounded base logits.
TEST(KlDivergence, PerPositionStatisticsMatchDirectComputation) {
  // The run: the base plus noise, so some top tokens agree and some do not.
  const auto base = RandomLogits(3, 2.f), noise = RandomLogits(4, 1.f);
  std::vector<float> run(base.size());
  for (size_t i = 0; i < run.size(); ++i) run[i] = base[i] + noise[i];
  auto r = Compare(WriteBase(base), run);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto prob = [](const float* l, int t) {
    double mx = l[0], s = 0;
    for (int i = 1; i < kVocab; ++i) mx = std::max(mx, double{l[i]});
    for (int i = 0; i < kVocab; ++i) s += std::exp(l[i] - mx);
    return std::exp(l[t] - mx) / s;
  };
  std::vector<double> klds, dps;
  double sum_dp = 0, sum_dp2 = 0;
  for (int i = 0; i < kRows; ++i) {
    const float* b = base.data() + static_cast<size_t>(i) * kVocab;
    const float* q = run.data() + static_cast<size_t>(i) * kVocab;
    klds.push_back(Kl(b, q));
    const int target = (i * 5) % kVocab;  // Compare's targets
    const double dp = prob(q, target) - prob(b, target);
    dps.push_back(dp);
    sum_dp += dp;
    sum_dp2 += dp * dp;
  }
  std::sort(klds.begin(), klds.end());
  std::sort(dps.begin(), dps.end());
  static_assert(kRows % 2 == 1, "the median below is the middle value");
  // The base's log-probs are stored in u16 steps of ~1.5e-4 nats: KLDs agree to ~1e-3 relative,
  // probabilities to ~1e-4 absolute.
  EXPECT_NEAR(r->kld.max, klds.back(), 1e-3 * klds.back());
  EXPECT_NEAR(r->kld.min, klds.front(), 1e-3 * klds.back());
  EXPECT_NEAR(r->kld.median, klds[kRows / 2], 1e-3 * klds.back());
  const double x = 0.9 * (kRows - 1);  // 90th percentile between two sorted values
  const auto i90 = static_cast<size_t>(x);
  EXPECT_NEAR(r->kld.p90, klds[i90] + (x - i90) * (klds[i90 + 1] - klds[i90]), 1e-3 * klds.back());
  EXPECT_NEAR(r->dp.max, dps.back(), 1e-4);
  EXPECT_NEAR(r->dp.min, dps.front(), 1e-4);
  EXPECT_NEAR(r->dp.median, dps[kRows / 2], 1e-4);
  EXPECT_NEAR(r->mean_dp, sum_dp / kRows, 1e-4);
  EXPECT_NEAR(r->rms_dp, std::sqrt(sum_dp2 / kRows), 1e-4);
  EXPECT_GT(r->rms_dp, 0.01);  // the two runs differ: the checks above are not of zeros
  const double a = r->top1_agreement;
  ASSERT_GT(a, 0.0);  // some tops agree and some do not, so the standard error is not 0
  ASSERT_LT(a, 1.0);
  EXPECT_DOUBLE_EQ(r->top1_stderr, std::sqrt(a * (1 - a) / (kRows - 1)));
}

TEST(KlDivergence, BadFilesAreClearErrors) {
  const auto base = RandomLogits(1, 2.f);
  const std::string path = WriteBase(base);
  // Fewer rows compared than the file holds.
  auto rd = KlBaseReader::Open(path);
  ASSERT_TRUE(rd.ok());
  std::vector<int32_t> targets(kRows, 0);
  ASSERT_TRUE((*rd)->CompareRows(base.data(), targets.data(), 3).ok());
  auto fin = (*rd)->Finish();
  ASSERT_FALSE(fin.ok());
  EXPECT_NE(fin.status().ToString().find("did not evaluate"), std::string::npos) << fin.status().ToString();
  // Truncated: the size no longer matches the header.
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = testing::ScratchPath("kl_cut.bin");
  std::ofstream(cut, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 3));
  auto r = KlBaseReader::Open(cut);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("needs"), std::string::npos) << r.status().ToString();
  // Not a base file at all.
  const std::string junk = testing::ScratchPath("kl_junk.bin");
  std::ofstream(junk, std::ios::binary) << "not a logits file at all";
  r = KlBaseReader::Open(junk);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().ToString().find("_logits_"), std::string::npos) << r.status().ToString();
}

}  // namespace
}  // namespace ferry
