// `ferry run` and `ferry bench` with speculative-decoding flags: the greedy golden text is
// unchanged by any kind of speculation, the stats line and the JSON carry the speculation
// figures, and bad flags fail with one line.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run_ferry.h"
#include "test_util.h"

namespace ferry {
namespace {

using Result = testing::CliResult;

Result Ferry(const std::string& args) {
  return testing::RunFerryCli(args, "spec_cli");
}

TEST(SpecCli, GreedyGoldenTextIsUnchangedBySpeculation) {
  FERRY_REQUIRE_ASSET("stories260K.gguf");
  std::ifstream in(testing::AssetPath("golden/stories260K-greedy.jsonl"));
  std::string line;
  std::getline(in, line);
  const std::string golden = nlohmann::json::parse(line)["generated_text"].get<std::string>();
  const std::string base =
      "run -m " + testing::AssetPath("stories260K.gguf") + " -p 'Once upon a time' -n 200 --temp 0 -t 2 ";
  for (const std::string& flags : std::vector<std::string>{
           "--spec-ngram 3", "--draft-quant q4 --spec-tokens 3",
           "--draft-model " + testing::AssetPath("stories260K.gguf") + " --spec-fixed-k"}) {
    Result r = Ferry(base + flags);
    ASSERT_EQ(r.code, 0) << flags << ": " << r.err;
    EXPECT_EQ(r.out, golden) << flags;
    EXPECT_NE(r.err.find("acceptance"), std::string::npos) << r.err;
  }
}

TEST(SpecCli, BenchJsonReportsPlainAndSpeculativeDecode) {
  std::string model = testing::TempDir() + "/tiny.gguf";
  ASSERT_EQ(Ferry("make-model --preset tiny --type q8_0 -o " + model).code, 0);
  Result r = Ferry("bench -m " + model + " -p 16 -n 16 -r 1 -t 1 --bw-mib 16 --json --draft-quant q4");
  ASSERT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"decode_tokens_per_s", "engine_decode_tokens_per_s", "spec_decode_tokens_per_s",
                          "acceptance_rate", "mean_accepted_tokens"})
    EXPECT_TRUE(j.contains(key)) << key << " missing: " << r.out;
  EXPECT_GT(j["spec_decode_tokens_per_s"].get<double>(), 0.0);
  EXPECT_GE(j["acceptance_rate"].get<double>(), 0.0);
  EXPECT_LE(j["acceptance_rate"].get<double>(), 1.0);
  EXPECT_EQ(j["spec_method"], "self-draft-q4");
}

TEST(SpecCli, BadSpeculationFlagsFailWithOneLine) {
  std::string model = testing::TempDir() + "/tiny.gguf";
  ASSERT_EQ(Ferry("make-model --preset tiny --type q8_0 -o " + model).code, 0);
  Result q = Ferry("run -m " + model + " -p hi -n 4 --draft-quant q5");
  EXPECT_EQ(q.code, 2);
  EXPECT_NE(q.err.find("--draft-quant must be q4"), std::string::npos) << q.err;
  EXPECT_EQ(std::count(q.err.begin(), q.err.end(), '\n'), 1) << q.err;
  Result both = Ferry("run -m " + model + " -p hi -n 4 --draft-quant q4 --spec-ngram 2");
  EXPECT_EQ(both.code, 2);
  EXPECT_NE(both.err.find("choose one"), std::string::npos) << both.err;
  Result missing =
      Ferry("run -m " + model + " -p hi -n 4 --draft-model " + testing::TempDir() + "/nope.gguf");
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.err.find("--draft-model"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace ferry
