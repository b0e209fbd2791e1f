// AutoAWQ export: the folder re-imports through Ferry's Hugging Face loader losslessly (int4
// bytes bit-exact, dense fallbacks equal to the dequantized int4), computes what the Ferry file
// computes, and packs nibbles in AutoAWQ's order.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "formats/awq_import.h"
#include "kernels/kernels.h"
#include "quant/autoawq_export.h"
#include "quant/int4_payloads.h"
#include "quant_test_util.h"

namespace ferry::quant {
namespace {

TEST(AutoAwq, PackingFollowsAutoAwqOrderMap) {
  // AutoAWQ (WQLinear_GEMM.from_linear): qweight[:, col] |= intweight[:, col*8 + order_map[i]] << 4i.
  // Column c of a row with q = c + 1 must therefore sit at bits 4i where order_map[i] == c.
  const int order_map[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  uint32_t want = 0;
  for (int i = 0; i < 8; ++i) want |= static_cast<uint32_t>(order_map[i] + 1) << (4 * i);
  uint32_t got = 0;
  for (int c = 0; c < 8; ++c) {
    int slot = 0;
    while (formats::kAwqOrder[slot] != c) ++slot;
    got |= static_cast<uint32_t>(c + 1) << (4 * slot);
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(GgufRowOfHfRow(0, 8), 0);
  EXPECT_EQ(GgufRowOfHfRow(1, 8), 2);  // HF row b of the first half is GGUF row 2b
  EXPECT_EQ(GgufRowOfHfRow(4, 8), 1);  // HF row half + b is GGUF row 2b + 1
  EXPECT_EQ(GgufRowOfHfRow(13, 8), 8 + 3);
}

TEST(AutoAwq, ExportReimportsLosslessly) {
  const std::string dir = ferry::testing::TempDir();
  for (const char* preset : {"tiny", "tiny-qwen2"}) {
    auto src = formats::OpenWeightSource(testing::WriteTinyModel(dir, preset));
    ASSERT_TRUE(src.ok());
    auto m = FloatModel::Load(**src);
    ASSERT_TRUE(m.ok());
    for (int64_t group : {32, 128}) {  // 128: no input width (64, 192) is a multiple -> all dense
      SCOPED_TRACE(std::string(preset) + " group " + std::to_string(group));
      const PayloadMap payloads = Int4Payloads(*m, group, nullptr);
      const std::string out = dir + "/awq-" + preset + std::to_string(group);
      auto rep = ExportAutoAwq(out, *m, payloads, group);
      ASSERT_TRUE(rep.ok()) << rep.status().ToString();
      std::ifstream cf(out + "/config.json");
      const auto cfg = nlohmann::json::parse(cf);
      EXPECT_EQ(cfg["quantization_config"]["quant_method"], "awq");
      EXPECT_EQ(cfg["quantization_config"]["version"], "gemm");
      EXPECT_EQ(cfg["quantization_config"]["group_size"], group);
      auto back = formats::OpenWeightSource(out);
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      const bool neox = m->config.rope_neox;
      const DType type = group == 32 ? DType::kI4G32 : DType::kI4G128;
      int packed = 0;
      for (int32_t l = 0; l < m->config.n_layers; ++l) {
        for (LinearKind k : kAllLinears) {
          const FloatLinear& lin = m->layers[static_cast<size_t>(l)][k];
          const std::string name = "blk." + std::to_string(l) + "." + LinearStem(k) + ".weight";
          const formats::TensorRef* t = (*back)->FindTensor(name);
          ASSERT_NE(t, nullptr) << name;
          ASSERT_EQ(t->shape, (std::vector<int64_t>{lin.n_out, lin.n_in}));
          const auto& bytes = payloads.at({l, k}).bytes;
          const size_t rb = RowBytes(type, lin.n_in);
          const bool qk = k == LinearKind::kQ || k == LinearKind::kK;
          for (int64_t r = 0; r < lin.n_out; ++r) {
            const int64_t src_row = qk && !neox ? GgufRowOfHfRow(r, m->config.head_dim) : r;
            const uint8_t* want = bytes.data() + static_cast<size_t>(src_row) * rb;
            if (t->dtype == type) {  // packed: the very same bytes
              ASSERT_EQ(0, std::memcmp(static_cast<const uint8_t*>(t->data) + static_cast<size_t>(r) * rb,
                                       want, rb))
                  << name << " row " << r;
            } else {  // dense fallback: exactly the dequantized int4 values
              ASSERT_EQ(t->dtype, DType::kF32) << name;
              std::vector<float> w(static_cast<size_t>(lin.n_in)), got(w.size());
              kernels::DequantizeRow(type, want, w.data(), lin.n_in);
              std::memcpy(got.data(), static_cast<const float*>(t->data) + r * lin.n_in, got.size() * 4);
              ASSERT_EQ(w, got) << name << " row " << r;
            }
          }
          packed += t->dtype == type;
        }
      }
      EXPECT_EQ(packed, rep->converted);
      EXPECT_EQ(packed, group == 32 ? 7 * m->config.n_layers : 0);  // g128: 64 and 192 are not multiples
      // The folder computes what the Ferry int4 weights compute.
      auto mb = FloatModel::Load(**back);
      ASSERT_TRUE(mb.ok());
      FloatModel mq = *m;
      for (auto& [key, p] : payloads) {
        FloatLinear& lin = mq.layers[static_cast<size_t>(key.first)][key.second];
        for (int64_t r = 0; r < lin.n_out; ++r)
          kernels::DequantizeRow(type, p.bytes.data() + static_cast<size_t>(r) * RowBytes(type, lin.n_in),
                                 lin.w.data() + r * lin.n_in, lin.n_in);
      }
      const auto tokens = testing::RandomTokens(m->config.n_vocab, 20, 8);
      EXPECT_LT(testing::RelDiff(mq.Forward(tokens), mb->Forward(tokens)), 1e-5);
    }
  }
}

}  // namespace
}  // namespace ferry::quant

namespace ferry::quant {
namespace {

TEST(AutoAwq, ImportRejectsOtherQuantizationMethodsByName) {
  const std::string dir = ferry::testing::TempDir();
  auto src = formats::OpenWeightSource(testing::WriteTinyModel(dir));
  ASSERT_TRUE(src.ok());
  auto m = FloatModel::Load(**src);
  ASSERT_TRUE(m.ok());
  const std::string out = dir + "/gptq";
  ASSERT_TRUE(ExportAutoAwq(out, *m, Int4Payloads(*m, 64, nullptr), 64).ok());
  std::ifstream in(out + "/config.json");
  auto cfg = nlohmann::json::parse(in);
  cfg["quantization_config"]["quant_method"] = "gptq";
  std::ofstream(out + "/config.json") << cfg.dump();
  auto back = formats::OpenWeightSource(out);
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().ToString().find("gptq"), std::string::npos) << back.status().ToString();
}

}  // namespace
}  // namespace ferry::quant
