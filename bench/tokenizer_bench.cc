// Tokenizer throughput on wiki.test.raw (1.29 MB): byte-level BPE with the gpt-2 and Llama 3
// vocabularies, SPM with llama-spm, WordPiece with bert-bge. Reports bytes/s of input text on one
// thread. Assets from $FERRY_ASSETS (default ../shared/assets).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "formats/gguf.h"
#include "formats/weight_source.h"
#include "tokenizer/tokenizer.h"

namespace {

std::string AssetsDir() {
  const char* env = std::getenv("FERRY_ASSETS");
  return env && *env ? env : "../shared/assets";
}

const std::string& WikiText() {
  static const std::string text = [] {
    std::ifstream f(AssetsDir() + "/eval-text/wiki.test.raw", std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }();
  return text;
}

std::unique_ptr<ferry::Tokenizer> Load(const std::string& what) {
  ferry::StatusOr<ferry::Metadata> md = ferry::NotFoundError("unset");
  if (what == "llama3") {
    md = ferry::LoadGpt2EncoderFiles(AssetsDir() + "/llama3.2-bpe/encoder.json",
                                     AssetsDir() + "/llama3.2-bpe/vocab.bpe");
  } else {
    auto src = ferry::formats::OpenGguf(AssetsDir() + "/llama.cpp-vocab/ggml-vocab-" + what + ".gguf");
    if (src.ok()) md = (*src)->metadata();
  }
  if (!md.ok()) return nullptr;
  auto tok = ferry::Tokenizer::FromMetadata(*md);
  if (!tok.ok()) return nullptr;
  return std::make_unique<ferry::Tokenizer>(std::move(tok).value());
}

void BM_Encode(benchmark::State& state, const char* vocab) {
  const std::string& text = WikiText();
  auto tok = Load(vocab);
  if (!tok || text.empty()) {
    state.SkipWithError("assets missing: set FERRY_ASSETS");
    return;
  }
  size_t n = 0;
  for (auto _ : state) {
    auto ids = tok->Encode(text, false, false);
    n = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(text.size()));
  state.counters["tokens"] = static_cast<double>(n);
}

BENCHMARK_CAPTURE(BM_Encode, gpt2, "gpt-2")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_Encode, llama3, "llama3")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_Encode, llama_spm, "llama-spm")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
BENCHMARK_CAPTURE(BM_Encode, bert_bge, "bert-bge")->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();

}  // namespace

BENCHMARK_MAIN();
