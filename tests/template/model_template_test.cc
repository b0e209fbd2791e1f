// Finding a model's chat template: tokenizer_config.json forms and GGUF metadata.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "template/model_template.h"
#include "test_util.h"

namespace ferry {
namespace {

TEST(ModelChatTemplate, TokenizerConfigStringAndNamedList) {
  auto a = ChatTemplateFromTokenizerConfig(R"({"chat_template": "{{ x }}", "bos_token": {"content": "<s>"}, "eos_token": "</s>"})", "cfg");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->source, "{{ x }}");
  EXPECT_EQ(a->bos_token.value_or("?"), "<s>");
  EXPECT_EQ(a->eos_token.value_or("?"), "</s>");
  auto b = ChatTemplateFromTokenizerConfig(
      R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})", "cfg");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->source, "D");
  EXPECT_EQ(ChatTemplateFromTokenizerConfig(R"({"bos_token": "<s>"})", "cfg").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(ChatTemplateFromTokenizerConfig("not json", "cfg").status().code(), StatusCode::kCorruptFile);
}

TEST(ModelChatTemplate, MetadataThenTokenizerConfigBesideTheModel) {
  Metadata md;
  md.SetString("tokenizer.chat_template", "M");
  md.SetStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
  md.SetUint("tokenizer.ggml.bos_token_id", 1);
  md.SetUint("tokenizer.ggml.eos_token_id", 2);
  auto m = ChatTemplateFromMetadata(md);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->source, "M");
  EXPECT_EQ(m->bos_token.value_or("?"), "<s>");
  EXPECT_EQ(m->eos_token.value_or("?"), "</s>");

  std::string dir = testing::TempDir();
  std::ofstream(dir + "/tokenizer_config.json") << R"({"chat_template": "C", "eos_token": "<|end|>"})";
  auto from_dir = FindModelChatTemplate(Metadata(), dir);
  ASSERT_TRUE(from_dir.ok()) << from_dir.status().ToString();
  EXPECT_EQ(from_dir->source, "C");
  EXPECT_EQ(from_dir->eos_token.value_or("?"), "<|end|>");
  EXPECT_EQ(FindModelChatTemplate(md, dir)->source, "M");  // the metadata's template wins
  std::filesystem::remove(dir + "/tokenizer_config.json");
  EXPECT_EQ(FindModelChatTemplate(Metadata(), dir).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace ferry
