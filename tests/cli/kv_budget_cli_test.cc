// `ferry bench throughput` with KV budgets: the JSON reports evictions and KV memory saved
// (peak blocks vs full caches' peak), and flags that do not fit together fail with one line.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "run_ferry.h"
#include "test_util.h"

namespace ferry {
namespace {

testing::CliResult Ferry(const std::string& args) {
  return testing::RunFerryCli(args, "kv_budget_cli");
}

TEST(KvBudgetCli, BenchThroughputReportsEvictionsAndMemorySaved) {
  std::string model = testing::TempDir() + "/tiny.gguf";
  ASSERT_EQ(Ferry("make-model --preset tiny --type q8_0 -o " + model).code, 0);
  const std::string bench = "bench throughput -m " + model +
                            " --num-prompts 4 --input-len 16:32 --output-len 200:200 --max-batch-tokens 32"
                            " --kv-cache-memory 4M -t 1 --json";
  testing::CliResult full = Ferry(bench), sink = Ferry(bench + " --kv-policy sink --kv-budget 64");
  ASSERT_EQ(full.code, 0) << full.err;
  ASSERT_EQ(sink.code, 0) << sink.err;
  auto f = nlohmann::json::parse(full.out), s = nlohmann::json::parse(sink.out);
  EXPECT_EQ(f["kv_evicted_tokens"], 0);
  EXPECT_EQ(f["kv_saved_fraction"].get<double>(), 0.0);
  EXPECT_EQ(s["kv_policy"], "sink");
  EXPECT_EQ(s["output_tokens"], 800);
  // Every computed position past the budget is evicted once: prompt + 199 - 64 per request.
  EXPECT_EQ(s["kv_evicted_tokens"].get<int64_t>(), s["input_tokens"].get<int64_t>() + 4 * (199 - 64));
  // At most budget + one pass (96 tokens = 6 blocks) per sequence, against up to 232 positions.
  EXPECT_LE(s["kv_peak_blocks"].get<int64_t>(), 4 * 6);
  EXPECT_GT(s["kv_saved_fraction"].get<double>(), 0.5);
  EXPECT_EQ(s["kv_peak_full_blocks"], f["kv_peak_full_blocks"]);

  testing::CliResult bad = Ferry(bench + " --kv-policy sink");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--kv-budget"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace ferry
