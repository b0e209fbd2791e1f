// Scalar normalization, activation, rotary and naive attention kernels (llama.cpp formulas).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/check.h"
#include "core/fp16.h"
#include "kernels/kv_row.h"
#include "kernels/quant_blocks.h"
#include "kernels/ref/ref.h"

namespace ferry::kernels::ref {

void RmsNorm(const float* x, const float* w, float* y, int64_t n, float eps) {
  // As ggml_compute_forward_rms_norm_f32: squares in float, summed in double.
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
}

void AddRmsNorm(float* x, const float* delta, const float* w, float* y, int64_t n, float eps) {
  AddInPlace(x, delta, n);
  RmsNorm(x, w, y, n, eps);
}

void Softmax(float* x, int64_t n) {
  if (n <= 0) return;
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i) max = std::max(max, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = (g / (1.0f + std::exp(-g))) * up[i];
  }
}

// -2 sqrt(2/pi) and the cubic's coefficient of the tanh approximation (kernels.h).
constexpr float kGeluNeg2C = -1.5957691216057308f, kGeluA = 0.044715f;

void GeluTanhMul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = (g / (1.0f + std::exp(kGeluNeg2C * (g + kGeluA * g * g * g)))) * up[i];
  }
}

const uint16_t* GeluFp16Table() {
  // ggml_gelu_f32 with its constants; fma where a -march=native ggml build contracts (the
  // plain product differs from ggml's table at one entry, x = -1.999).
  static const std::vector<uint16_t> table = [] {
    constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f, kA = 0.044715f;
    std::vector<uint16_t> t(65536 + 1, 0);
    for (uint32_t h = 0; h < 65536; ++h) {
      const float x = Fp16ToFp32(static_cast<uint16_t>(h));
      const float g = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * std::fma(kA * x, x, 1.0f)));
      t[h] = Fp32ToFp16(g);
    }
    return t;
  }();
  return table.data();
}

void GeluFp16TableMul(const float* gate, const float* up, float* out, int64_t n) {
  const uint16_t* table = GeluFp16Table();
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    if (g <= -10.0f)
      out[i] = 0.0f;
    else if (g >= 10.0f)
      out[i] = g * up[i];
    else
      out[i] = Fp16ToFp32(table[Fp32ToFp16(g)]) * up[i];
  }
}

// ggml_compute_forward_swiglu_oai_f32's expression, operand for operand.
void SwigluOaiMul(const float* gate, const float* up, float* out, int64_t n) {
  constexpr float kAlpha = 1.702f, kLimit = 7.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = std::min(gate[i], kLimit);
    const float y = std::clamp(up[i], -kLimit, kLimit);
    out[i] = x / (1.f + std::exp(kAlpha * (-x))) * (y + 1.f);
  }
}

void AddInPlace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void SoftCap(float* x, int64_t n, float cap) {
  const float inv = 1.0f / cap;  // ggml: scale by 1/cap, tanhf, scale by cap
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] * inv);
}

void HadamardRotate(float* x, int n_heads, int head_dim) {
  FERRY_CHECK(head_dim > 0 && (head_dim & (head_dim - 1)) == 0);
  const float norm = 1.0f / std::sqrt(static_cast<float>(head_dim));
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * head_dim;
    // Fast Walsh-Hadamard transform: log2(head_dim) butterfly stages (a + b, a - b).
    for (int len = 1; len < head_dim; len *= 2)
      for (int i = 0; i < head_dim; i += 2 * len)
        for (int j = i; j < i + len; ++j) {
          const float a = v[j], b = v[j + len];
          v[j] = a + b;
          v[j + len] = a - b;
        }
    for (int j = 0; j < head_dim; ++j) v[j] *= norm;
  }
}

void Rope(float* x, int n_heads, int head_dim, int rot_dim, const float* cs, bool neox) {
  const int half = rot_dim / 2;
  for (int j = 0; j < half; ++j) {
    const float c = cs[2 * j], s = cs[2 * j + 1];
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + static_cast<int64_t>(h) * head_dim;
      const int i0 = neox ? j : 2 * j;
      const int i1 = neox ? j + half : 2 * j + 1;
      const float x0 = v[i0], x1 = v[i1];
      // llama.cpp's rotate_pairs as GCC contracts it on x86 (one product rounded, the other fused)
      v[i0] = std::fma(x0, c, -(x1 * s));
      v[i1] = std::fma(x0, s, x1 * c);
    }
  }
}

void KvHeadRow(DType t, const void* cache, int64_t row, int head_dim, float* out) {
  const int64_t bytes = static_cast<int64_t>(RowBytes(t, head_dim));
  DequantizeRow(t, static_cast<const uint8_t*>(cache) + row * bytes, out, head_dim);
}

std::vector<float> QueryAsRead(DType k_type, const float* q, int head_dim) {
  std::vector<float> out(q, q + head_dim);
  if (!internal::AttnQueryIsQ8(k_type)) return out;
  std::vector<block_q8_0> qb(static_cast<size_t>(head_dim / 32));
  QuantizeActQ8_0(q, qb.data(), head_dim);
  for (int d = 0; d < head_dim; ++d)
    out[static_cast<size_t>(d)] = Fp16ToFp32(qb[d / 32].d) * static_cast<float>(qb[d / 32].qs[d % 32]);
  return out;
}

namespace {

// ref::AttentionNaive's pv_int_bound of one (query, head): pi [n_keys] the softmax weights,
// v_row(p) key p's V head row in its stored type (q8_0 / q4_0), bound [dv].
template <typename VRow>
void PvIntBound(DType v_type, const std::vector<double>& pi, VRow&& v_row, int dv, float* bound) {
  std::fill(bound, bound + dv, 0.f);
  if (v_type != DType::kQ8_0 && v_type != DType::kQ4_0) return;
  const int n_keys = static_cast<int>(pi.size()), reach = internal::kAttnPvIntMaxKeys - 1;
  const size_t block_bytes = RowBytes(v_type, 32);
  std::vector<double> a(pi.size());  // [n_keys] pi_p * |d_p| of one block
  for (int b = 0; b < dv / 32; ++b) {
    for (int p = 0; p < n_keys; ++p) {
      uint16_t h;
      std::memcpy(&h, v_row(p) + b * block_bytes, 2);
      a[p] = pi[p] * std::fabs(Fp16ToFp32(h));
    }
    for (int p = 0; p < n_keys; ++p) {
      const double amax =
          *std::max_element(a.begin() + std::max(0, p - reach), a.begin() + std::min(n_keys, p + reach + 1));
      const uint8_t* block = v_row(p) + b * block_bytes;
      for (int i = 0; i < 32; ++i) {
        const int qi =
            v_type == DType::kQ8_0 ? KvQuantInt<DType::kQ8_0>(block, i) : KvQuantInt<DType::kQ4_0>(block, i);
        bound[32 * b + i] += static_cast<float>(0.5 / internal::kAttnPvIntLevels * std::abs(qi) * amax);
      }
    }
  }
}

}  // namespace

void AttentionNaive(const float* q, int n_q, const int32_t* q_pos, int n_heads, int n_kv_heads, int head_dim,
                    float scale, const KvBlocks& kv, float* out, float* pv_int_bound) {
  const int group = n_heads / n_kv_heads;
  const int dv = kv.ValueDim(head_dim);  // v_in_k: V is the first dv values of the K row
  std::vector<double> scores;
  std::vector<double> acc(static_cast<size_t>(dv));
  for (int t = 0; t < n_q; ++t) {
    const int n_keys = q_pos[t] + 1;
    scores.assign(static_cast<size_t>(n_keys), 0.0);
    for (int h = 0; h < n_heads; ++h) {
      const int kvh = h / group;
      const float* qv = q + (static_cast<int64_t>(t) * n_heads + h) * head_dim;
      const std::vector<float> q_read = QueryAsRead(kv.k_type, qv, head_dim);
      qv = q_read.data();
      std::vector<float> row_buf(static_cast<size_t>(head_dim));
      auto row = [&](DType type, const void* cache, int p) {
        const int64_t blk = kv.block_table[p / kv.block_size];
        const int64_t slot = blk * kv.block_size + p % kv.block_size;
        KvHeadRow(type, cache, slot * n_kv_heads + kvh, head_dim, row_buf.data());
        return row_buf.data();
      };
      double max = -std::numeric_limits<double>::infinity();
      for (int p = 0; p < n_keys; ++p) {
        const float* k = row(kv.k_type, kv.k_cache, p);
        double s = 0;
        for (int d = 0; d < head_dim; ++d) s += static_cast<double>(qv[d]) * k[d];
        scores[p] = s * scale;
        max = std::max(max, scores[p]);
      }
      double sum = 0;
      for (int p = 0; p < n_keys; ++p) {
        scores[p] = std::exp(scores[p] - max);
        sum += scores[p];
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int p = 0; p < n_keys; ++p) {
        const float* v = kv.v_in_k > 0 ? row(kv.k_type, kv.k_cache, p) : row(kv.v_type, kv.v_cache, p);
        for (int d = 0; d < dv; ++d) acc[d] += scores[p] / sum * v[d];
      }
      float* o = out + (static_cast<int64_t>(t) * n_heads + h) * dv;
      for (int d = 0; d < dv; ++d) o[d] = static_cast<float>(acc[d]);
      if (pv_int_bound == nullptr) continue;
      for (int p = 0; p < n_keys; ++p) scores[p] /= sum;  // now pi
      const bool in_k = kv.v_in_k > 0;
      const void* v_cache = in_k ? kv.k_cache : kv.v_cache;
      const int64_t v_bytes = static_cast<int64_t>(RowBytes(kv.v_type, in_k ? head_dim : dv));
      PvIntBound(
          kv.v_type, scores,
          [&](int p) {
            const int64_t slot =
                int64_t{kv.block_table[p / kv.block_size]} * kv.block_size + p % kv.block_size;
            return static_cast<const uint8_t*>(v_cache) + (slot * n_kv_heads + kvh) * v_bytes;
          },
          dv, pv_int_bound + (static_cast<int64_t>(t) * n_heads + h) * dv);
    }
  }
}

double ReadSum(const float* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  return s;
}

}  // namespace ferry::kernels::ref
