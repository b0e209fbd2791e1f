// End-to-end tests of the `ferry` binary: exit codes, output forms, one-line errors.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "run_ferry.h"
#include "test_util.h"

namespace ferry {
namespace {

using Result = testing::CliResult;

Result Ferry(const std::string& args) {
  return testing::RunFerryCli(args, "cli");
}

class CliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // Per process: ctest runs each test case as its own process, possibly in parallel.
    model_ = new std::string(testing::ScratchPath("cli_tiny_q8_0.gguf"));
    Result r = Ferry("make-model --preset tiny --type q8_0 -o " + *model_);
    ASSERT_EQ(r.code, 0) << r.err;
  }
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(*model_)) << "make-model failed in SetUpTestSuite";
  }
  static void TearDownTestSuite() { delete model_; }
  static std::string* model_;
};
std::string* CliTest::model_ = nullptr;

TEST_F(CliTest, InfoDescribesModel) {
  Result r = Ferry("info -m " + *model_);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("architecture:   llama"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("q8_0"), std::string::npos);
  EXPECT_NE(r.out.find("context length: 512"), std::string::npos);
  EXPECT_NE(r.out.find("tokenizer:      llama, 512 tokens"), std::string::npos);
}

TEST_F(CliTest, RunStreamsTextAndStatsGoToStderr) {
  Result a = Ferry("run -m " + *model_ + " -p 'the cat' -n 12 --temp 0 --ignore-eos");
  ASSERT_EQ(a.code, 0) << a.err;
  EXPECT_FALSE(a.out.empty());
  EXPECT_EQ(a.out.find("TTFT"), std::string::npos);
  EXPECT_NE(a.err.find("TTFT"), std::string::npos);
  EXPECT_NE(a.err.find("prompt tokens"), std::string::npos);
  EXPECT_NE(a.err.find("decode"), std::string::npos);
  Result b = Ferry("run -m " + *model_ + " -p 'the cat' -n 12 --temp 0 --ignore-eos --threads 1");
  EXPECT_EQ(a.out, b.out);  // greedy output does not depend on the thread count
  Result c = Ferry("run -m " + *model_ +
                   " -p 'the cat' -n 12 --temp 1 --seed 5 --top-k 0 --top-p 1 --min-p 0 --ignore-eos");
  Result d = Ferry("run -m " + *model_ +
                   " -p 'the cat' -n 12 --temp 1 --seed 5 --top-k 0 --top-p 1 --min-p 0 --ignore-eos");
  EXPECT_EQ(c.out, d.out);
}

TEST_F(CliTest, TokenizeIdsIsOneJsonList) {
  Result r = Ferry("tokenize -m " + *model_ + " -p 'hello world' --ids");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_array());
  ASSERT_FALSE(j.empty());
  EXPECT_EQ(j[0], 1);  // BOS
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1);
}

TEST_F(CliTest, PerplexityPrintsFinalLine) {
  std::string text = testing::TempDir() + "/text.txt";
  {
    std::ofstream f(text);
    for (int i = 0; i < 200; ++i) f << "the cat sat on the mat and looked at the dog. ";
  }
  Result r = Ferry("ppl -m " + *model_ + " -f " + text + " --ctx 64");
  ASSERT_EQ(r.code, 0) << r.err;
  std::string last = r.out.substr(r.out.rfind("PPL = "));
  double ppl = 0, err = 0;
  ASSERT_EQ(std::sscanf(last.c_str(), "PPL = %lf +/- %lf", &ppl, &err), 2) << last;
  EXPECT_GT(ppl, 1.0);
  EXPECT_GT(err, 0.0);
}

// --exact-gelu reaches gemma's FFN (its perplexity moves off llama.cpp's fp16 GELU table) and
// leaves a SwiGLU model's bits alone.
TEST_F(CliTest, ExactGeluChangesOnlyGeGluModels) {
  const std::string text = testing::TempDir() + "/gelu_text.txt";
  {
    std::ofstream f(text);
    for (int i = 0; i < 60; ++i) f << "the cat sat on the mat and looked at the dog. ";
  }
  const std::string gemma = testing::TempDir() + "/gemma2-tiny-q8_0.gguf";
  ASSERT_EQ(Ferry("make-model --preset gemma2-tiny --type q8_0 -o " + gemma).code, 0);
  const auto ppl_line = [&](const std::string& model, const std::string& flags) {
    Result r = Ferry("ppl -m " + model + " -f " + text + " --ctx 64 " + flags);
    EXPECT_EQ(r.code, 0) << r.err;
    const size_t at = r.out.rfind("PPL = ");
    return at == std::string::npos ? std::string() : r.out.substr(at);
  };
  const std::string table = ppl_line(gemma, ""), exact = ppl_line(gemma, "--exact-gelu");
  ASSERT_FALSE(table.empty());
  EXPECT_NE(table, exact);
  EXPECT_EQ(ppl_line(*model_, ""), ppl_line(*model_, "--exact-gelu"));
}

TEST(Cli, ErrorsAreOneLineAndNonZero) {
  std::string dir = testing::TempDir();
  Result missing = Ferry("run -m " + dir + "/nope.gguf -p hi");
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.err.find("nope.gguf"), std::string::npos);
  EXPECT_EQ(std::count(missing.err.begin(), missing.err.end(), '\n'), 1) << missing.err;

  std::string bad = dir + "/bad.gguf";
  {
    std::ofstream f(bad, std::ios::binary);
    f << "GGUF\x03\x00\x00\x00garbage";
  }
  Result corrupt = Ferry("info -m " + bad);
  EXPECT_NE(corrupt.code, 0);
  EXPECT_NE(corrupt.err.find("bad.gguf"), std::string::npos) << corrupt.err;

  Result preset = Ferry("make-model --preset nope --type q8_0 -o " + dir + "/x.gguf");
  EXPECT_NE(preset.code, 0);
  EXPECT_NE(preset.err.find("unknown preset"), std::string::npos);
  Result type = Ferry("make-model --preset tiny --type q9_9 -o " + dir + "/x.gguf");
  EXPECT_NE(type.code, 0);
}

TEST(Cli, GoldenTextFromStories260K) {
  FERRY_REQUIRE_ASSET("stories260K.gguf");
  std::ifstream in(testing::AssetPath("golden/stories260K-greedy.jsonl"));
  std::string line;
  std::getline(in, line);
  auto j = nlohmann::json::parse(line);
  Result r =
      Ferry("run -m " + testing::AssetPath("stories260K.gguf") + " -p 'Once upon a time' -n 200 --temp 0");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, j["generated_text"].get<std::string>());
}

}  // namespace
}  // namespace ferry

namespace ferry {
namespace {

TEST(Cli, TokenizeWorksOnTokenizerOnlyFoldersAndFiles) {
  FERRY_REQUIRE_ASSET("hf-tokenizers/gpt2/tokenizer.json");
  FERRY_REQUIRE_ASSET("llama3.2-bpe/encoder.json");
  Result gpt2 = Ferry("tokenize -m " + testing::AssetPath("hf-tokenizers/gpt2") + " -p 'Hello world' --ids");
  ASSERT_EQ(gpt2.code, 0) << gpt2.err;
  EXPECT_EQ(gpt2.out, "[15496, 995]\n");
  Result llama3 =
      Ferry("tokenize -m " + testing::AssetPath("llama3.2-bpe/encoder.json") + " -p 'hello world' --ids");
  ASSERT_EQ(llama3.code, 0) << llama3.err;
  EXPECT_EQ(llama3.out, "[128000, 15339, 1917]\n");
}

TEST(Cli, ExplicitTokenizerReplacesTheEmbeddedOne) {
  FERRY_REQUIRE_ASSET("stories260K.gguf");
  FERRY_REQUIRE_ASSET("llama3.2-bpe/encoder.json");
  // stories260K embeds a 512-token SPM vocabulary; the Llama 3 files must replace it whole.
  Result r = Ferry("tokenize -m " + testing::AssetPath("stories260K.gguf") + " --tokenizer " +
                   testing::AssetPath("llama3.2-bpe/encoder.json") + " -p 'hello world' --ids");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "[128000, 15339, 1917]\n");
}

}  // namespace
}  // namespace ferry
