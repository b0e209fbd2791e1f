#include "model/linear.h"

#include <cmath>
#include <cstring>

#include "kernels/kernels.h"

namespace ferry {

void Linear::MaybePack(bool repack, ThreadPool* pool) {
  if (IsW8A8() || packed || !kernels::CanPack(type, n_in)) return;
  if (!repack && kernels::CanMatMul(type)) return;
  auto buf = std::make_shared<AlignedBuffer>(kernels::PackedBytes(type, n_out, n_in));
  kernels::PackWeights(type, data, n_out, n_in, buf->data(), pool);
  packed = std::move(buf);
}

void Linear::Apply(const float* x, int64_t n_tok, float* y, ThreadPool* pool) const {
  if (IsW8A8()) {
    kernels::MatMulW8A8(static_cast<const int8_t*>(data), w8a8_scale->data(), n_out, n_in, x, n_tok,
                        w8a8_input_scale, y, pool);
  } else if (packed) {
    kernels::MatMulPacked(packed->data(), type, n_out, n_in, x, n_tok, y, pool);
  } else {
    kernels::MatMul(data, type, n_out, n_in, x, n_tok, y, pool);
  }
}

Linear StackRows(std::initializer_list<Linear*> parts, ThreadPool* pool) {
  const Linear& first = **parts.begin();
  Linear out;
  for (const Linear* p : parts) {
    if (!p->packed || p->IsW8A8() || p->type != first.type || p->n_in != first.n_in) return Linear{};
    out.n_out += p->n_out;
    out.bytes += p->bytes;
  }
  out.type = first.type;
  out.n_in = first.n_in;
  const size_t row = RowBytes(out.type, out.n_in);
  AlignedBuffer rows(row * static_cast<size_t>(out.n_out));  // [n_out, row] original rows, stacked
  size_t off = 0;
  for (const Linear* p : parts) {
    std::memcpy(static_cast<char*>(rows.data()) + off, p->data, row * static_cast<size_t>(p->n_out));
    off += row * static_cast<size_t>(p->n_out);
  }
  out.data = nullptr;  // only the packed copy exists
  auto buf = std::make_shared<AlignedBuffer>(kernels::PackedBytes(out.type, out.n_out, out.n_in));
  kernels::PackWeights(out.type, rows.data(), out.n_out, out.n_in, buf->data(), pool);
  out.packed = std::move(buf);
  // Parts that can also run in place drop their packed copy (types with only a packed kernel
  // keep it: the parts stay usable on their own).
  for (Linear* p : parts)
    if (kernels::CanMatMul(p->type)) p->packed.reset();
  return out;
}

namespace {

// "blk.0.attn_q.weight" -> "blk.0.attn_q" (the W8A8 companions hang off the stem).
std::string Stem(const std::string& name) {
  const std::string suffix = ".weight";
  if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
    return name.substr(0, name.size() - suffix.size());
  return name;
}

// A small f32-convertible tensor of exactly n elements.
StatusOr<std::vector<float>> SmallVector(const formats::WeightSource& src, const formats::TensorRef& t,
                                         int64_t n) {
  if (t.NumElements() != n)
    return InvalidArgumentError("'{}': tensor '{}' has shape {}, expected [{}]", src.path(), t.name,
                                t.ShapeString(), n);
  if (!kernels::CanDequantize(t.dtype) || !RowBytesChecked(t.dtype, n) ||
      *RowBytesChecked(t.dtype, n) != t.nbytes)
    return UnsupportedError("'{}': tensor '{}' has type {}; write it as f32", src.path(), t.name,
                            DTypeName(t.dtype));
  std::vector<float> v(static_cast<size_t>(n));
  kernels::DequantizeRow(t.dtype, t.data, v.data(), n);
  return v;
}

Status AttachW8A8(const formats::WeightSource& src, const std::string& name, Linear& lin) {
  const std::string scale_name = name + "_scale", input_name = Stem(name) + ".input_scale";
  const formats::TensorRef* ws = src.FindTensor(scale_name);
  if (!ws)
    return InvalidArgumentError(
        "'{}': tensor '{}' is int8 but '{}' is missing (W8A8 needs per-output-channel f32 scales [{}]; "
        "docs/formats.md \"W8A8 tensors\")",
        src.path(), name, scale_name, lin.n_out);
  FERRY_ASSIGN_OR_RETURN(std::vector<float> scales, SmallVector(src, *ws, lin.n_out));
  for (float s : scales)
    if (!std::isfinite(s))
      return InvalidArgumentError("'{}': tensor '{}' holds a non-finite scale", src.path(), scale_name);
  lin.w8a8_scale = std::make_shared<const std::vector<float>>(std::move(scales));
  if (const formats::TensorRef* is = src.FindTensor(input_name)) {
    FERRY_ASSIGN_OR_RETURN(std::vector<float> v, SmallVector(src, *is, 1));
    if (!(v[0] > 0.f) || !std::isfinite(v[0]))
      return InvalidArgumentError(
          "'{}': tensor '{}' must be one finite scale > 0 (got {}); omit it for per-token "
          "dynamic activation scales",
          src.path(), input_name, v[0]);
    lin.w8a8_input_scale = v[0];
  }
  if (lin.n_in > kernels::kMaxW8A8In)
    return UnsupportedError("'{}': tensor '{}' has rows of {} elements; W8A8 supports at most {}", src.path(),
                            name, lin.n_in, kernels::kMaxW8A8In);
  lin.bytes += ws->nbytes;
  return Status::Ok();
}

// t's type computable for rows of n_in (int8 only as W8A8, when allowed) and its bytes those of
// n_rows such rows: the row's byte size, or the error naming the file and the tensor.
StatusOr<size_t> CheckMatrixBytes(const formats::WeightSource& src, const formats::TensorRef& t,
                                  int64_t n_rows, int64_t n_in, bool allow_w8a8) {
  if (!(allow_w8a8 && t.dtype == DType::kI8) && !kernels::CanMatMul(t.dtype) &&
      !kernels::CanPack(t.dtype, n_in))
    return UnsupportedError("'{}': tensor '{}' has type {}, which Ferry cannot compute with yet", src.path(),
                            t.name, DTypeName(t.dtype));
  auto row = RowBytesChecked(t.dtype, n_in);
  if (!row || *row * static_cast<size_t>(n_rows) != t.nbytes)
    return InvalidArgumentError("'{}': tensor '{}' byte size {} does not match its shape", src.path(), t.name,
                                t.nbytes);
  return *row;
}

}  // namespace

StatusOr<std::vector<Linear>> LoadLinearStack(const formats::WeightSource& src, const std::string& name,
                                              int64_t n_mats, int64_t n_out, int64_t n_in) {
  const formats::TensorRef* t = src.FindTensor(name);
  if (!t) return NotFoundError("'{}': tensor '{}' is missing", src.path(), name);
  if (t->shape.size() != 3 || t->shape[0] != n_mats || t->shape[1] != n_out || t->shape[2] != n_in)
    return InvalidArgumentError("'{}': tensor '{}' has shape {}, expected [{}, {}, {}]", src.path(), name,
                                t->ShapeString(), n_mats, n_out, n_in);
  FERRY_ASSIGN_OR_RETURN(const size_t row,
                         CheckMatrixBytes(src, *t, n_mats * n_out, n_in, /*allow_w8a8=*/false));
  const size_t mat_bytes = row * static_cast<size_t>(n_out);
  std::vector<Linear> out;
  for (int64_t m = 0; m < n_mats; ++m)
    out.push_back(Linear{static_cast<const uint8_t*>(t->data) + static_cast<size_t>(m) * mat_bytes, t->dtype,
                         n_out, n_in, mat_bytes, nullptr, nullptr, 0.f});
  return out;
}

StatusOr<Linear> LoadLinear(const formats::WeightSource& src, const std::string& name, int64_t n_out,
                            int64_t n_in) {
  const formats::TensorRef* t = src.FindTensor(name);
  if (!t) return NotFoundError("'{}': tensor '{}' is missing", src.path(), name);
  if (t->shape.size() != 2 || t->shape[0] != n_out || t->shape[1] != n_in)
    return InvalidArgumentError("'{}': tensor '{}' has shape {}, expected [{}, {}]", src.path(), name,
                                t->ShapeString(), n_out, n_in);
  const bool w8a8 = t->dtype == DType::kI8;
  FERRY_RETURN_IF_ERROR(CheckMatrixBytes(src, *t, n_out, n_in, /*allow_w8a8=*/true).status());
  Linear lin{t->data, t->dtype, n_out, n_in, t->nbytes, nullptr, nullptr, 0.f};
  if (w8a8) FERRY_RETURN_IF_ERROR(AttachW8A8(src, name, lin));
  return lin;
}

}  // namespace ferry
