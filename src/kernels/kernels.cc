// Public conversion and elementwise entry points: forward to ref/ or the active ISA table.
#include "kernels/kernels.h"

#include "kernels/dispatch.h"
#include "kernels/ref/ref.h"

namespace ferry::kernels {

bool CanDequantize(DType t) {
  return ref::CanDequantize(t);
}
void DequantizeRow(DType t, const void* src, float* dst, int64_t n) {
  ref::DequantizeRow(t, src, dst, n);
}
bool CanQuantize(DType t) {
  return ref::CanQuantize(t);
}
void QuantizeRow(DType t, const float* src, void* dst, int64_t n) {
  ref::QuantizeRow(t, src, dst, n);
}

void RmsNorm(const float* x, const float* w, float* y, int64_t n, float eps) {
  internal::Table().rms_norm(x, w, y, n, eps);
}
void AddRmsNorm(float* x, const float* delta, const float* w, float* y, int64_t n, float eps) {
  internal::Table().add_rms_norm(x, delta, w, y, n, eps);
}
void Softmax(float* x, int64_t n) {
  internal::Table().softmax(x, n);
}
void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  internal::Table().silu_mul(gate, up, out, n);
}
void GeluTanhMul(const float* gate, const float* up, float* out, int64_t n) {
  internal::Table().gelu_tanh_mul(gate, up, out, n);
}
void GeluFp16TableMul(const float* gate, const float* up, float* out, int64_t n) {
  internal::Table().gelu_fp16_table_mul(gate, up, out, n);
}
void SwigluOaiMul(const float* gate, const float* up, float* out, int64_t n) {
  ref::SwigluOaiMul(gate, up, out, n);
}
void AddInPlace(float* y, const float* x, int64_t n) {
  internal::Table().add(y, x, n);
}
void SoftCap(float* x, int64_t n, float cap) {
  internal::Table().softcap(x, n, cap);
}

void Rope(float* x, int n_heads, int head_dim, int rot_dim, const float* cs, bool neox) {
  // O(n_heads * head_dim), the angles given: not worth an ISA variant.
  ref::Rope(x, n_heads, head_dim, rot_dim, cs, neox);
}

void HadamardRotate(float* x, int n_heads, int head_dim) {
  // O(n_heads * head_dim * log head_dim) adds per token: the compiler's vectorized butterflies
  // are enough next to the projections.
  ref::HadamardRotate(x, n_heads, head_dim);
}

}  // namespace ferry::kernels
