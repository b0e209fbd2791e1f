#include "quant/int4_payloads.h"

#include "quant/int4_quant.h"

namespace ferry::quant {

PayloadMap Int4Payloads(const FloatModel& m, int64_t group, const ClipMap* clips) {
  PayloadMap out;
  static const std::vector<float> kNoClip;
  for (size_t l = 0; l < m.layers.size(); ++l) {
    for (LinearKind k : kAllLinears) {
      const FloatLinear& lin = m.layers[l][k];
      const std::vector<float>* clip = &kNoClip;
      if (clips) {
        auto it = clips->find({static_cast<int32_t>(l), k});
        if (it != clips->end()) clip = &it->second;
      }
      LinearPayload p;
      p.type = Int4TypeForGroup(group);
      p.bytes = QuantizeMatrixInt4(lin.w, lin.n_out, lin.n_in, group, *clip);
      out[{static_cast<int32_t>(l), k}] = std::move(p);
    }
  }
  return out;
}

}  // namespace ferry::quant
