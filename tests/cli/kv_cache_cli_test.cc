// The KV cache type flags on the CLI: --cache-rotate reaches the cache (bench reports it and
// the rotated K changes what a q4_0 cache stores, so perplexity moves) while an f32 cache's
// perplexity is the same with and without it; bench's type lists and depth; and `ppl
// --kl-divergence-base` comparing one cache type's run with another's.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run_ferry.h"
#include "test_util.h"

namespace ferry {
namespace {

testing::CliResult Ferry(const std::string& args) {
  return testing::RunFerryCli(args, "kv_cache_cli");
}

// The "PPL = X +/- Y" line's X.
double Ppl(const testing::CliResult& r) {
  const size_t at = r.out.rfind("PPL = ");
  EXPECT_NE(at, std::string::npos) << r.out << r.err;
  return at == std::string::npos ? 0 : std::stod(r.out.substr(at + 6));
}

TEST(KvCacheCli, CacheRotateReachesTheCache) {
  const std::string model = testing::TempDir() + "/kv-cli-tiny-hd64.gguf";
  ASSERT_EQ(Ferry("make-model --preset tiny-hd64 --type f32 -o " + model).code, 0);
  testing::CliResult bench = Ferry(
      "bench -m " + model + " -p 8 -n 4 -r 1 --bw-mib 16 -t 1 --json --cache-type-k q4_0 --cache-rotate");
  ASSERT_EQ(bench.code, 0) << bench.err;
  auto j = nlohmann::json::parse(bench.out.substr(0, bench.out.find('\n')));
  EXPECT_EQ(j["type_k"], "q4_0");
  EXPECT_EQ(j["cache_rotate"], true);

  const std::string text = testing::TempDir() + "/kv-cli-text.txt";
  {
    std::ofstream out(text);
    for (int i = 0; i < 300; ++i) out << "the cat sat on a mat and then it ran to see the dog. ";
  }
  const std::string ppl = "ppl -m " + model + " -f " + text + " -c 128 --chunks 4 -t 1";
  const double f32 = Ppl(Ferry(ppl + " --kv-cache-dtype f32"));
  const double f32_rot = Ppl(Ferry(ppl + " --kv-cache-dtype f32 --cache-rotate"));
  const double q4 = Ppl(Ferry(ppl + " --cache-type-k q4_0"));
  const double q4_rot = Ppl(Ferry(ppl + " --cache-type-k q4_0 --cache-rotate"));
  // An f32 model and cache: the scores agree to f32 rounding (no q8 activation rounding for a
  // last-bit difference to flip), so PPL agrees to about 1e-6 relative; 2e-5 allows for that.
  EXPECT_NEAR(f32_rot, f32, 2e-5 * f32) << f32 << " " << f32_rot;
  EXPECT_NE(q4_rot, q4);  // rotated keys round differently
}

// `ferry bench` takes lists of KV types as llama-bench's -ctk / -ctv do: one cache per type, one
// JSON line each, in the order given (every K type with every V type); a list elsewhere, or one
// with an empty item, is a clear error.
TEST(KvCacheCli, BenchRunsEachTypeOfAList) {
  const std::string model = testing::TempDir() + "/kv-cli-list-tiny-hd64.gguf";
  ASSERT_EQ(Ferry("make-model --preset tiny-hd64 --type f32 -o " + model).code, 0);
  const std::string bench = "bench -m " + model + " -p 8 -n 4 -r 2 --bw-mib 16 -t 1 --json ";
  auto types_of = [](const std::string& out) {
    std::vector<std::string> kv;
    size_t at = 0;
    for (size_t nl; (nl = out.find('\n', at)) != std::string::npos; at = nl + 1) {
      const auto j = nlohmann::json::parse(out.substr(at, nl - at));
      EXPECT_GT(j["decode_tokens_per_s"].get<double>(), 0);
      // One sample per repetition, whose mean is the reported rate.
      for (const char* test : {"prefill", "decode"}) {
        const auto samples = j[std::string(test) + "_samples_ts"].get<std::vector<double>>();
        EXPECT_EQ(samples.size(), 2u) << test;
        if (samples.size() == 2) {
          EXPECT_DOUBLE_EQ((samples[0] + samples[1]) / 2,
                           j[std::string(test) + "_tokens_per_s"].get<double>())
              << test;
        }
      }
      kv.push_back(j["type_k"].get<std::string>() + "/" + j["type_v"].get<std::string>());
    }
    return kv;
  };
  testing::CliResult pairs = Ferry(bench + "--kv-cache-dtype f32,q4_0");
  ASSERT_EQ(pairs.code, 0) << pairs.err;
  EXPECT_EQ(types_of(pairs.out), (std::vector<std::string>{"f32/f32", "q4_0/q4_0"}));
  testing::CliResult grid = Ferry(bench + "--cache-type-k f16,q8_0 --cache-type-v f32,q4_0");
  ASSERT_EQ(grid.code, 0) << grid.err;
  EXPECT_EQ(types_of(grid.out), (std::vector<std::string>{"f16/f32", "f16/q4_0", "q8_0/f32", "q8_0/q4_0"}));
  testing::CliResult k_only = Ferry(bench + "--cache-type-k q8_0,bf16");
  ASSERT_EQ(k_only.code, 0) << k_only.err;
  EXPECT_EQ(types_of(k_only.out), (std::vector<std::string>{"q8_0/f16", "bf16/f16"}));

  testing::CliResult empty = Ferry(bench + "--kv-cache-dtype f32,,q8_0");
  EXPECT_NE(empty.code, 0);
  EXPECT_NE(empty.err.find("an empty item"), std::string::npos) << empty.err;
  testing::CliResult both = Ferry(bench + "--kv-cache-dtype f32,q8_0 --cache-type-k f16");
  EXPECT_NE(both.code, 0);
  EXPECT_NE(both.err.find("not both"), std::string::npos) << both.err;
  testing::CliResult bad = Ferry(bench + "--cache-type-v f32,q5_0");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--cache-type-v 'q5_0'"), std::string::npos) << bad.err;
  testing::CliResult run = Ferry("run -m " + model + " -p hi -n 2 --kv-cache-dtype f32,q8_0");
  EXPECT_NE(run.code, 0);
  EXPECT_NE(run.err.find("a comma-separated list is for the model bench"), std::string::npos) << run.err;
}

// In the table form, each later type of a list gets a line per test against the first: the
// ratio of the mean rates and the median, least and largest per-repetition ratio (a ratio of
// means is a weighted mean of the pairs' ratios, so it lies between their least and largest).
TEST(KvCacheCli, BenchComparesEachTypeOfAListWithTheFirst) {
  const std::string model = testing::TempDir() + "/kv-cli-ratio-tiny-hd64.gguf";
  ASSERT_EQ(Ferry("make-model --preset tiny-hd64 --type f32 -o " + model).code, 0);
  const std::string bench = "bench -m " + model + " -p 8 -n 4 -r 3 --bw-mib 16 -t 1 ";
  testing::CliResult r = Ferry(bench + "--kv-cache-dtype f32,q4_0,f16");
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* line : {"q4_0/q4_0 vs f32/f32, prefill: x", "q4_0/q4_0 vs f32/f32, decode: x",
                           "f16/f16 vs f32/f32, prefill: x", "f16/f16 vs f32/f32, decode: x"}) {
    const size_t at = r.out.find(line);
    ASSERT_NE(at, std::string::npos) << line << "\n" << r.out;
    double means = 0, median = 0, lo = 0, hi = 0;
    ASSERT_EQ(
        std::sscanf(r.out.c_str() + at + std::strlen(line),
                    "%lf of the means; per repetition median x%lf (x%lf .. x%lf)", &means, &median, &lo, &hi),
        4)
        << r.out.substr(at, 120);
    EXPECT_GT(lo, 0) << line;
    EXPECT_LE(lo, median) << line;
    EXPECT_LE(median, hi) << line;
    EXPECT_LE(lo, means + 1e-3) << line;  // the line prints 3 decimals
    EXPECT_LE(means, hi + 1e-3) << line;
  }
  testing::CliResult one = Ferry(bench + "--kv-cache-dtype f32");
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_EQ(one.out.find(" vs "), std::string::npos) << one.out;
}

// The decode test starts at the context depth, as llama-bench's tg test does, not after the
// prompt test: its bytes per token (weights plus the K/V of the positions it reads) do not
// depend on -p, and with -d they count the depth alone. A --kv-policy cache, which evicted part
// of the context during the prompt test, gets the context again first instead of failing on
// the rewind, and so at every repetition (the others keep the context of the first).
TEST(KvCacheCli, BenchDecodesFromTheDepthAsLlamaBench) {
  const std::string model = testing::TempDir() + "/kv-cli-depth-tiny-hd64.gguf";
  ASSERT_EQ(Ferry("make-model --preset tiny-hd64 --type f32 -o " + model).code, 0);
  const std::string bench = "bench -m " + model + " -n 4 -r 2 --bw-mib 16 -t 1 --json --kv-cache-dtype f32 ";
  auto bytes = [&](const std::string& args) {
    testing::CliResult r = Ferry(bench + args);
    EXPECT_EQ(r.code, 0) << r.err;
    if (r.code != 0) return 0.0;
    return nlohmann::json::parse(r.out.substr(0, r.out.find('\n')))["bytes_per_decode_token"].get<double>();
  };
  const double no_prompt = bytes("-p 0"), prompt = bytes("-p 64");
  EXPECT_GT(no_prompt, 0);
  EXPECT_EQ(prompt, no_prompt);
  const double deep = bytes("-p 0 -d 32"), deep_prompt = bytes("-p 64 -d 32");
  EXPECT_GT(deep, no_prompt);
  EXPECT_EQ(deep_prompt, deep);
  testing::CliResult budget = Ferry(bench + "-p 64 -d 48 --kv-policy sink --kv-budget 32");
  EXPECT_EQ(budget.code, 0) << budget.err;
}

// `ferry ppl --kl-divergence-base` against a q4_0 cache's run: the one-line summary, then
// llama-perplexity's statistics block in its labels, consistent with the summary, and the PPL
// line still last.
TEST(KvCacheCli, PplReportsLlamaPerplexityStatistics) {
  const std::string model = testing::TempDir() + "/kv-cli-kl-tiny-hd64.gguf";
  ASSERT_EQ(Ferry("make-model --preset tiny-hd64 --type f32 -o " + model).code, 0);
  const std::string text = testing::TempDir() + "/kv-cli-kl-text.txt";
  {
    std::ofstream out(text);
    for (int i = 0; i < 300; ++i) out << "the cat sat on a mat and then it ran to see the dog. ";
  }
  const std::string base = testing::TempDir() + "/kv-cli-kl-base.kld";
  std::remove(base.c_str());
  const std::string ppl =
      "ppl -m " + model + " -f " + text + " -c 128 --chunks 4 -t 1 --kl-divergence-base " + base;
  ASSERT_EQ(Ferry(ppl + " --kv-cache-dtype f32").code, 0);  // writes the base
  const testing::CliResult r = Ferry(ppl + " --kv-cache-dtype q4_0");
  ASSERT_EQ(r.code, 0) << r.err;
  // The value after `label` on its line.
  auto value = [&](const std::string& label) {
    const size_t at = r.out.find(label);
    EXPECT_NE(at, std::string::npos) << label << " in\n" << r.out;
    return at == std::string::npos ? -1.0 : std::stod(r.out.substr(at + label.size()));
  };
  const double mean = value("Mean    KLD:"), max = value("Maximum KLD:"), median = value("Median  KLD:");
  EXPECT_DOUBLE_EQ(mean, value("KLD = "));  // the summary's mean, both at 6 decimals
  EXPECT_GT(mean, 0);
  EXPECT_GE(max, mean);
  EXPECT_LE(median, max);
  EXPECT_DOUBLE_EQ(value("Same top p:"), value("top-1 agreement "));  // both in % to 3 decimals
  EXPECT_LE(value("Minimum Δp:"), value("Median  Δp:"));
  EXPECT_LE(value("Median  Δp:"), value("Maximum Δp:"));
  EXPECT_GT(value("RMS Δp    :"), 0);
  EXPECT_EQ(r.out.rfind("PPL = "), r.out.rfind('\n', r.out.size() - 2) + 1) << r.out;  // the last line
}

}  // namespace
}  // namespace ferry
