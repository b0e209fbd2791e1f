#include "engine/kl_divergence.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/mean_error.h"

namespace ferry {
namespace {

constexpr char kMagic[8] = {'_', 'l', 'o', 'g', 'i', 't', 's', '_'};

int32_t RowWords(int32_t n_vocab) {
  return 2 * ((n_vocab + 1) / 2) + 4;
}

// Scored rows per window: positions n_ctx/2 .. n_ctx-2.
int64_t RowsPerWindow(uint32_t n_ctx) {
  return static_cast<int64_t>(n_ctx) - 1 - n_ctx / 2;
}

struct LogSumExp {
  float max;
  int32_t argmax;
  double log_sum_exp;  // log sum exp(l - max)
};
LogSumExp Normalizer(const float* l, int32_t n) {
  LogSumExp r{l[0], 0, 0};
  for (int32_t i = 1; i < n; ++i)
    if (l[i] > r.max) {
      r.max = l[i];
      r.argmax = i;
    }
  double sum = 0;
  for (int32_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(l[i]) - r.max);
  r.log_sum_exp = std::log(sum);
  return r;
}

}  // namespace

Percentiles PercentilesOf(std::vector<float>& v) {
  Percentiles p;
  if (v.empty()) return p;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  auto at = [&](double fraction) {
    const double x = fraction * static_cast<double>(n - 1);
    const auto i = static_cast<size_t>(x);
    const double f = x - static_cast<double>(i);
    return (1 - f) * v[i] + f * v[std::min(i + 1, n - 1)];
  };
  p.min = v.front();
  p.max = v.back();
  p.median = n % 2 == 0 ? 0.5 * (static_cast<double>(v[n / 2 - 1]) + v[n / 2]) : v[n / 2];
  p.p0_1 = at(0.001);
  p.p1 = at(0.01);
  p.p5 = at(0.05);
  p.p10 = at(0.10);
  p.p25 = at(0.25);
  p.p75 = at(0.75);
  p.p90 = at(0.90);
  p.p95 = at(0.95);
  p.p99 = at(0.99);
  p.p99_9 = at(0.999);
  return p;
}

StatusOr<std::unique_ptr<KlBaseWriter>> KlBaseWriter::Create(const std::string& path, const KlBaseHeader& h) {
  if (h.n_vocab <= 0 || h.n_chunk <= 0 || h.n_ctx < 4 ||
      h.tokens.size() != static_cast<size_t>(h.n_chunk) * h.n_ctx)
    return InvalidArgumentError("'{}': inconsistent KL-divergence base header", path);
  auto w = std::unique_ptr<KlBaseWriter>(new KlBaseWriter());
  w->path_ = path;
  w->n_vocab_ = h.n_vocab;
  w->row_.assign(static_cast<size_t>(RowWords(h.n_vocab)), 0);
  w->out_.open(path, std::ios::binary | std::ios::trunc);
  if (!w->out_) return IoError("cannot create KL-divergence base file '{}'", path);
  w->out_.write(kMagic, sizeof(kMagic));
  w->out_.write(reinterpret_cast<const char*>(&h.n_ctx), sizeof(h.n_ctx));
  w->out_.write(reinterpret_cast<const char*>(&h.n_vocab), sizeof(h.n_vocab));
  w->out_.write(reinterpret_cast<const char*>(&h.n_chunk), sizeof(h.n_chunk));
  w->out_.write(reinterpret_cast<const char*>(h.tokens.data()),
                static_cast<std::streamsize>(h.tokens.size() * 4));
  if (!w->out_) return IoError("cannot write '{}'", path);
  return w;
}

Status KlBaseWriter::AddRows(const float* logits, int32_t n_rows) {
  for (int32_t r = 0; r < n_rows; ++r) {
    const float* l = logits + static_cast<size_t>(r) * n_vocab_;
    const LogSumExp z = Normalizer(l, n_vocab_);
    const float min_logit = std::max(*std::min_element(l, l + n_vocab_), z.max - 16.0f);
    const float log_sum_exp = static_cast<float>(z.log_sum_exp);
    const float min_log_prob = min_logit - z.max - log_sum_exp;
    const float scale = (z.max - min_logit) / 65535.0f;
    std::memcpy(row_.data(), &scale, 4);
    std::memcpy(row_.data() + 2, &min_log_prob, 4);
    uint16_t* q = row_.data() + 4;
    for (int32_t i = 0; i < n_vocab_; ++i)
      q[i] =
          scale > 0 && l[i] > min_logit ? static_cast<uint16_t>(std::lround((l[i] - min_logit) / scale)) : 0;
    out_.write(reinterpret_cast<const char*>(row_.data()), static_cast<std::streamsize>(row_.size() * 2));
  }
  if (!out_) return IoError("cannot write '{}'", path_);
  return Status::Ok();
}

Status KlBaseWriter::Close() {
  out_.close();
  if (!out_) return IoError("cannot write '{}'", path_);
  return Status::Ok();
}

StatusOr<std::unique_ptr<KlBaseReader>> KlBaseReader::Open(const std::string& path) {
  auto r = std::unique_ptr<KlBaseReader>(new KlBaseReader());
  r->path_ = path;
  r->in_.open(path, std::ios::binary);
  if (!r->in_) return IoError("cannot open KL-divergence base file '{}'", path);
  char magic[8] = {};
  r->in_.read(magic, sizeof(magic));
  if (!r->in_ || std::memcmp(magic, kMagic, sizeof(magic)) != 0)
    return InvalidArgumentError(
        "'{}' is not a KL-divergence base file (no \"_logits_\" magic); write one with "
        "`ferry ppl --kl-divergence-base FILE` or `llama-perplexity --kl-divergence-base FILE`",
        path);
  KlBaseHeader& h = r->header_;
  r->in_.read(reinterpret_cast<char*>(&h.n_ctx), sizeof(h.n_ctx));
  r->in_.read(reinterpret_cast<char*>(&h.n_vocab), sizeof(h.n_vocab));
  r->in_.read(reinterpret_cast<char*>(&h.n_chunk), sizeof(h.n_chunk));
  if (!r->in_) return InvalidArgumentError("'{}': truncated header (n_ctx, n_vocab, n_chunk)", path);
  if (h.n_ctx < 4 || h.n_ctx > (1u << 24) || h.n_vocab <= 0 || h.n_vocab > (1 << 24) || h.n_chunk <= 0)
    return InvalidArgumentError("'{}': header has n_ctx {}, n_vocab {}, n_chunk {}; not a valid base file",
                                path, h.n_ctx, h.n_vocab, h.n_chunk);
  // Check the size before allocating: header + tokens + rows must be exactly the file.
  r->in_.seekg(0, std::ios::end);
  const auto file_size = static_cast<uint64_t>(r->in_.tellg());
  const uint64_t n_tok = static_cast<uint64_t>(h.n_chunk) * h.n_ctx;
  const uint64_t rows = static_cast<uint64_t>(h.n_chunk) * static_cast<uint64_t>(RowsPerWindow(h.n_ctx));
  const uint64_t want = 20 + n_tok * 4 + rows * static_cast<uint64_t>(RowWords(h.n_vocab)) * 2;
  if (file_size != want)
    return InvalidArgumentError(
        "'{}' has {} bytes, but its header (n_ctx {}, n_vocab {}, n_chunk {}) needs {}", path, file_size,
        h.n_ctx, h.n_vocab, h.n_chunk, want);
  r->in_.seekg(20);
  h.tokens.resize(n_tok);
  r->in_.read(reinterpret_cast<char*>(h.tokens.data()), static_cast<std::streamsize>(n_tok * 4));
  if (!r->in_) return IoError("cannot read the tokens of '{}'", path);
  for (int32_t t : h.tokens)
    if (t < 0 || t >= h.n_vocab)
      return InvalidArgumentError("'{}': token id {} is outside the vocabulary [0, {})", path, t, h.n_vocab);
  r->row_.assign(static_cast<size_t>(RowWords(h.n_vocab)), 0);
  r->rows_left_ = static_cast<int64_t>(rows);
  r->klds_.reserve(rows);  // bounded: the file holds this many rows, checked above
  r->dps_.reserve(rows);
  return r;
}

Status KlBaseReader::CompareRows(const float* logits, const int32_t* targets, int32_t n_rows) {
  const int32_t n_vocab = header_.n_vocab;
  if (n_rows > rows_left_)
    return InvalidArgumentError("'{}' holds fewer scored positions than this run ({} more)", path_,
                                n_rows - rows_left_);
  for (int32_t r = 0; r < n_rows; ++r) {
    in_.read(reinterpret_cast<char*>(row_.data()), static_cast<std::streamsize>(row_.size() * 2));
    if (!in_) return IoError("cannot read the log-probabilities of '{}'", path_);
    --rows_left_;
    float scale, min_log_prob;
    std::memcpy(&scale, row_.data(), 4);
    std::memcpy(&min_log_prob, row_.data() + 2, 4);
    const uint16_t* q = row_.data() + 4;
    const float* l = logits + static_cast<size_t>(r) * n_vocab;
    const LogSumExp z = Normalizer(l, n_vocab);
    const double log_z = z.max + z.log_sum_exp;  // log q_i = l_i - log_z
    double kld = 0, base_max = 0;
    int32_t base_top = 0;
    for (int32_t i = 0; i < n_vocab; ++i) {
      const double log_p = static_cast<double>(scale) * q[i] + min_log_prob;
      if (i == 0 || log_p > base_max) {
        base_max = log_p;
        base_top = i;
      }
      if (log_p > -16.0) kld += std::exp(log_p) * (log_p - (l[i] - log_z));  // as llama.cpp: 16 nats
    }
    const int32_t t = targets[r];
    if (t < 0 || t >= n_vocab) return InvalidArgumentError("target token {} outside the vocabulary", t);
    const double nll = log_z - l[t], nll_base = -(static_cast<double>(scale) * q[t] + min_log_prob);
    const double dp = std::exp(-nll) - std::exp(-nll_base);
    sum_kld_ += kld;
    sum_kld2_ += kld * kld;
    sum_nll_ += nll;
    sum_nll_base_ += nll_base;
    sum_dp_ += dp;
    sum_dp2_ += dp * dp;
    sum_dp4_ += dp * dp * dp * dp;
    klds_.push_back(static_cast<float>(kld));
    dps_.push_back(static_cast<float>(dp));
    same_top_ += z.argmax == base_top;
    ++count_;
  }
  return Status::Ok();
}

StatusOr<KlDivergenceResult> KlBaseReader::Finish() {
  if (rows_left_ != 0)
    return InvalidArgumentError(
        "'{}' holds {} scored positions this run did not evaluate; run over the same "
        "windows (--chunks -1)",
        path_, rows_left_);
  if (count_ == 0) return InvalidArgumentError("'{}': no positions compared", path_);
  KlDivergenceResult r;
  const double n = static_cast<double>(count_);
  r.count = count_;
  const MeanAndError kld = MeanOf(sum_kld_, sum_kld2_, count_);
  r.mean_kld = kld.mean;
  r.kld_stderr = kld.error;
  r.kld = PercentilesOf(klds_);
  r.top1_agreement = static_cast<double>(same_top_) / n;
  r.top1_stderr = count_ > 1 ? std::sqrt(r.top1_agreement * (1 - r.top1_agreement) / (n - 1)) : 0.0;
  const MeanAndError dp = MeanOf(sum_dp_, sum_dp2_, count_);
  r.mean_dp = dp.mean;
  r.dp_stderr = dp.error;
  // RMS from the mean square and its error (d sqrt(x) = dx / (2 sqrt(x))), as llama-perplexity.
  const MeanAndError dp2 = MeanOf(sum_dp2_, sum_dp4_, count_);
  r.rms_dp = std::sqrt(dp2.mean);
  r.rms_dp_stderr = r.rms_dp > 0 ? 0.5 / r.rms_dp * dp2.error : 0.0;
  r.dp = PercentilesOf(dps_);
  r.ppl = std::exp(sum_nll_ / n);
  r.ppl_base = std::exp(sum_nll_base_ / n);
  return r;
}

}  // namespace ferry
