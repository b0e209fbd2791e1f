#include "engine/pooling.h"

#include <cmath>
#include <string>

namespace ferry {

const char* PoolingName(Pooling p) {
  switch (p) {
    case Pooling::kMean:
      return "mean";
    case Pooling::kLast:
      return "last";
    case Pooling::kCls:
      return "cls";
    default:
      return "none";
  }
}

StatusOr<Pooling> ParsePooling(std::string_view name) {
  for (Pooling p : {Pooling::kMean, Pooling::kLast, Pooling::kCls})
    if (name == PoolingName(p)) return p;
  return InvalidArgumentError("unknown pooling '{}' (mean, last or cls)", name);
}

StatusOr<Pooling> PoolingFromMetadata(const Metadata& md, std::string_view arch) {
  const std::optional<int64_t> v = md.GetInt(std::string(arch) + ".pooling_type");
  if (!v || *v == 0) return Pooling::kLast;
  switch (*v) {
    case 1:
      return Pooling::kMean;
    case 2:
      return Pooling::kCls;
    case 3:
      return Pooling::kLast;
    default:
      return UnsupportedError("{}.pooling_type {} is not supported (1 mean, 2 cls, 3 last); use --pooling",
                              arch, *v);
  }
}

void PooledState::Add(Pooling p, int32_t pos, const float* row, int32_t dim) {
  if (acc_.empty()) acc_.assign(static_cast<size_t>(dim), 0.0);
  const bool take = p == Pooling::kLast || (p == Pooling::kCls && pos == 0);
  if (p == Pooling::kMean) {
    for (int32_t j = 0; j < dim; ++j) acc_[static_cast<size_t>(j)] += row[j];
  } else if (take) {
    for (int32_t j = 0; j < dim; ++j) acc_[static_cast<size_t>(j)] = row[j];
  }
}

std::vector<float> PooledState::Finish() const {
  double norm = 0;
  for (double a : acc_) norm += a * a;
  norm = std::sqrt(norm);
  // The mean's 1/count cancels in the normalization; a zero vector stays zero.
  std::vector<float> out(acc_.size());
  for (size_t j = 0; j < acc_.size(); ++j) out[j] = norm > 0 ? static_cast<float>(acc_[j] / norm) : 0.0f;
  return out;
}

}  // namespace ferry
