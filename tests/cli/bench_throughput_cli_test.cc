// `ferry bench throughput --json-schema FILE`: every request is constrained (it ends where the
// schema's grammar does, not at --output-len), the JSON says so, and a bad schema fails before
// the run naming the flag.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "run_ferry.h"
#include "test_util.h"

namespace ferry {
namespace {

testing::CliResult Ferry(const std::string& args) {
  return testing::RunFerryCli(args, "bench_throughput_cli");
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(BenchThroughputCli, JsonSchemaConstrainsEveryRequest) {
  const std::string model = testing::TempDir() + "/tiny.gguf";
  ASSERT_EQ(Ferry("make-model --preset tiny --type q8_0 -o " + model).code, 0);
  const std::string bench =
      "bench throughput -m " + model + " --num-prompts 4 --input-len 8:16 --output-len 60:60 -t 1 --json";
  const std::string schema = WriteFile("yes_no.json", R"({"enum": ["yes", "no"]})");
  testing::CliResult free = Ferry(bench), constrained = Ferry(bench + " --json-schema " + schema);
  ASSERT_EQ(free.code, 0) << free.err;
  ASSERT_EQ(constrained.code, 0) << constrained.err;
  auto f = nlohmann::json::parse(free.out), c = nlohmann::json::parse(constrained.out);
  EXPECT_EQ(f["constraint"], "none");
  EXPECT_EQ(f["output_tokens"], 4 * 60);
  EXPECT_EQ(c["constraint"], "json-schema " + schema);
  // "yes" or "no" with its quotes, then the end token: a few tokens, never the 60 allowed.
  EXPECT_GE(c["output_tokens"].get<int>(), 4 * 2);
  EXPECT_LE(c["output_tokens"].get<int>(), 4 * 6);

  testing::CliResult bad =
      Ferry(bench + " --json-schema " + WriteFile("bad.json", R"({"type": "object", "minProperties": 1})"));
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--json-schema"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("minProperties"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace ferry
