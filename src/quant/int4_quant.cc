#include "quant/int4_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "core/fp16.h"

namespace ferry::quant {
namespace {

// One group's parameters: the fp16 step d, its float value and the zero point z.
struct GroupParams {
  uint16_t dh;
  float d, id;
  int z;
};

GroupParams ParamsFor(const float* x, int64_t len, float clip) {
  float mn = x[0], mx = x[0], amax = 0.f;
  for (int64_t i = 0; i < len; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
    amax = std::max(amax, std::fabs(x[i]));
  }
  if (clip < 1.f) {
    mn = std::max(mn, -clip * amax);
    mx = std::min(mx, clip * amax);
  }
  // Same arithmetic as kernels::ref::QuantizeRowInt4.
  mn = std::min(mn, 0.f);
  mx = std::max(mx, 0.f);
  GroupParams p;
  p.dh = Fp32ToFp16((mx - mn) / 15.f);
  p.d = Fp16ToFp32(p.dh);
  p.id = p.d > 0.f ? 1.f / p.d : 0.f;
  p.z = p.d > 0.f ? std::clamp(static_cast<int>(std::nearbyint(-mn * p.id)), 0, 15) : 0;
  return p;
}

inline int Quant(float v, const GroupParams& p) {
  return std::clamp(static_cast<int>(std::nearbyint(v * p.id)) + p.z, 0, 15);
}

}  // namespace

DType Int4TypeForGroup(int64_t group) {
  if (group == 32) return DType::kI4G32;
  if (group == 64) return DType::kI4G64;
  FERRY_CHECK(group == 128);
  return DType::kI4G128;
}

void QuantizeRowInt4Clipped(const float* x, int64_t n, int64_t group, const float* clip, uint8_t* dst) {
  const size_t gb = 4 + static_cast<size_t>(group) / 2;
  for (int64_t g = 0; g * group < n; ++g, dst += gb) {
    const float* xg = x + g * group;
    const int64_t len = std::min(group, n - g * group);  // ragged last group: fewer
    const GroupParams p = ParamsFor(xg, len, clip ? clip[g] : 1.f);
    std::memcpy(dst, &p.dh, 2);
    dst[2] = static_cast<uint8_t>(p.z);
    dst[3] = 0;
    auto q_of = [&](int64_t i) { return i < len ? Quant(xg[i], p) : p.z; };  // padding = zero point
    for (int64_t k = 0; k < (len + 31) / 32; ++k)
      for (int i = 0; i < 16; ++i)
        dst[4 + 16 * k + i] = static_cast<uint8_t>(q_of(32 * k + i) | (q_of(32 * k + 16 + i) << 4));
  }
}

void FakeQuantRowInt4(const float* x, int64_t n, int64_t group, const float* clip, float* y) {
  for (int64_t g = 0; g * group < n; ++g) {
    const float* xg = x + g * group;
    const int64_t len = std::min(group, n - g * group);
    const GroupParams p = ParamsFor(xg, len, clip ? clip[g] : 1.f);
    for (int64_t i = 0; i < len; ++i) y[g * group + i] = static_cast<float>(Quant(xg[i], p) - p.z) * p.d;
  }
}

std::vector<uint8_t> QuantizeMatrixInt4(const std::vector<float>& w, int64_t n_out, int64_t n_in,
                                        int64_t group, const std::vector<float>& clip) {
  const size_t rb = FerryInt4RowBytes(group, n_in);
  const int64_t ng = NumGroups(n_in, group);
  std::vector<uint8_t> out(rb * static_cast<size_t>(n_out));
  for (int64_t o = 0; o < n_out; ++o)
    QuantizeRowInt4Clipped(w.data() + o * n_in, n_in, group, clip.empty() ? nullptr : clip.data() + o * ng,
                           out.data() + static_cast<size_t>(o) * rb);
  return out;
}

void QuantizeMatrixInt8PerChannel(const std::vector<float>& w, int64_t n_out, int64_t n_in,
                                  std::vector<int8_t>* q, std::vector<float>* scale) {
  q->assign(static_cast<size_t>(n_out * n_in), 0);
  scale->assign(static_cast<size_t>(n_out), 0.f);
  for (int64_t o = 0; o < n_out; ++o) {
    const float* row = w.data() + o * n_in;
    float amax = 0.f;
    for (int64_t i = 0; i < n_in; ++i) amax = std::max(amax, std::fabs(row[i]));
    const float s = amax / 127.f;
    (*scale)[static_cast<size_t>(o)] = s;
    const float is = s > 0.f ? 1.f / s : 0.f;
    for (int64_t i = 0; i < n_in; ++i)
      (*q)[static_cast<size_t>(o * n_in + i)] =
          static_cast<int8_t>(std::clamp(static_cast<int>(std::nearbyint(row[i] * is)), -127, 127));
  }
}

void FakeQuantActInt8Static(float* x, int64_t count, float scale) {
  if (!(scale > 0.f)) return;
  const float is = 1.f / scale;
  for (int64_t i = 0; i < count; ++i)
    x[i] = static_cast<float>(std::clamp(static_cast<int>(std::nearbyint(x[i] * is)), -127, 127)) * scale;
}

void FakeQuantActInt8PerToken(float* x, int64_t n_tok, int64_t n) {
  for (int64_t t = 0; t < n_tok; ++t) {
    float* row = x + t * n;
    float amax = 0.f;
    for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(row[i]));
    FakeQuantActInt8Static(row, n, amax / 127.f);
  }
}

}  // namespace ferry::quant
