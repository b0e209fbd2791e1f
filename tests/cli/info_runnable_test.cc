// `ferry info` says "not runnable: ..." for every file `ferry run` refuses: a tensor missing or
// zero-sized, and an unknown architecture (named, with the supported ones).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "formats/gguf.h"
#include "run_ferry.h"
#include "test_util.h"

namespace ferry {
namespace {

// A copy of the tiny model with `edit` applied to its tensor list and metadata.
std::string WriteEdited(
    const std::string& name,
    const std::function<void(std::vector<formats::GgufTensorToWrite>&, Metadata&)>& edit) {
  const std::string base = testing::TempDir() + "/info_base.gguf";
  EXPECT_EQ(testing::RunFerryCli("make-model --preset tiny --type f16 -o " + base, "info_make").code, 0);
  auto src = formats::OpenWeightSource(base);
  EXPECT_TRUE(src.ok()) << src.status().ToString();
  Metadata md = (*src)->metadata();
  std::vector<formats::GgufTensorToWrite> tensors;
  for (const formats::TensorRef& t : (*src)->tensors())
    tensors.push_back({t.name, t.dtype, t.shape, t.data, t.nbytes});
  edit(tensors, md);
  const std::string path = testing::TempDir() + "/" + name;
  EXPECT_TRUE(formats::WriteGguf(path, md, tensors).ok());
  return path;
}

void ExpectNotRunnable(const std::string& path, const std::string& reason) {
  testing::CliResult info = testing::RunFerryCli("info -m " + path, "info_runnable");
  EXPECT_EQ(info.code, 0) << info.err;
  EXPECT_NE(info.out.find("model:          not runnable: "), std::string::npos) << info.out;
  EXPECT_NE(info.out.find(reason), std::string::npos) << info.out;
  testing::CliResult run = testing::RunFerryCli("run -m " + path + " -p x -n 1", "info_runnable_run");
  EXPECT_NE(run.code, 0) << "ferry run accepted what ferry info called not runnable";
}

TEST(InfoRunnable, MissingTensorIsNotRunnable) {
  ExpectNotRunnable(
      WriteEdited("missing.gguf",
                  [](auto& tensors, Metadata&) {
                    std::erase_if(tensors, [](const auto& t) { return t.name == "blk.1.ffn_down.weight"; });
                  }),
      "blk.1.ffn_down.weight");
}

TEST(InfoRunnable, ZeroSizedTensorIsNotRunnable) {
  ExpectNotRunnable(WriteEdited("zero.gguf",
                                [](auto& tensors, Metadata&) {
                                  for (auto& t : tensors)
                                    if (t.name == "blk.0.attn_q.weight") {
                                      t.shape = {0, t.shape.back()};
                                      t.nbytes = 0;
                                    }
                                }),
                    "blk.0.attn_q.weight");
}

TEST(InfoRunnable, IntactModelIsRunnable) {
  const std::string path = WriteEdited("intact.gguf", [](auto&, Metadata&) {});
  testing::CliResult info = testing::RunFerryCli("info -m " + path, "info_runnable");
  EXPECT_EQ(info.out.find("not runnable"), std::string::npos) << info.out;
}

TEST(InfoRunnable, UnknownArchitectureIsNamedWithTheSupportedOnes) {
  const std::string path =
      WriteEdited("arch.gguf", [](auto&, Metadata& md) { md.SetString("general.architecture", "gpt2"); });
  ExpectNotRunnable(path,
                    "architecture 'gpt2' is not supported (supported: llama, qwen2, qwen2moe, qwen3, "
                    "qwen3moe, granite, smollm3, olmo2, gemma2, gemma3, phi3, gpt-oss, deepseek2)");
}

}  // namespace
}  // namespace ferry
