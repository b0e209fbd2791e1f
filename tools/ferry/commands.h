// The `ferry` subcommands: each file registers one on the CLI11 app and returns its runner.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "base/status.h"
#include "core/thread_pool.h"
#include "engine/loaded_model.h"
#include "model/kv_storage.h"
#include "speculative/self_draft.h"
#include "speculative/spec_config.h"

namespace ferry::cli {

using Runner = std::function<int()>;

Runner AddRunCommand(CLI::App& app);
Runner AddPplCommand(CLI::App& app);
Runner AddTokenizeCommand(CLI::App& app);
Runner AddTemplateCommand(CLI::App& app);
Runner AddInfoCommand(CLI::App& app);
Runner AddMakeModelCommand(CLI::App& app);
Runner AddBenchCommand(CLI::App& app);
// Offline quantization tools (quant/): calibrate, quantize, prune.
Runner AddCalibrateCommand(CLI::App& app);
Runner AddQuantizeCommand(CLI::App& app);
Runner AddPruneCommand(CLI::App& app);
// Contextual FFN sparsity calibration (quant/ffn_sparsify.h).
Runner AddSparsifyCommand(CLI::App& app);
Runner AddServeCommand(CLI::App& app);
// Parts of `ferry bench`: options of the default model benchmark on `bench` itself, and nested
// benchmark subcommands (each adds one subcommand to `bench`).
Runner AddBenchModelOptions(CLI::App& bench);
Runner AddBenchThroughputCommand(CLI::App& bench);
Runner AddBenchServeCommand(CLI::App& bench);

// Prints "ferry: <reason>" on one line to stderr and returns the exit code for it.
int Fail(const Status& status);

// Run-time sparsity flags (--moe-capacity-factor, ...; sparsity_flags.cc): one definition for
// every command that computes (run, ppl, bench, bench throughput, serve).
struct SparsityFlags {
  SparsityOptions options;
  void Add(CLI::App* cmd);
  // The batching engine (bench throughput, serve) runs MoE capacity but not KV budgets yet:
  // an error naming the flag instead of silently ignoring it.
  Status CheckSupportedByEngine() const;
};
// What the model's sparsity skipped so far: one human line ("" when nothing applies) and JSON.
// What the model's sparsity options (Model::sparsity()) skipped, from the stats of a run.
std::string SparsityReport(const Model& model, const SparsityStats& stats);
nlohmann::json SparsityJson(const Model& model, const SparsityStats& stats);

// KV cache storage types (kv_cache_flags.cc): --cache-type-k / --cache-type-v (llama.cpp's
// names) and --kv-cache-dtype (vLLM's, both at once), for every command that computes.
struct KvCacheFlags {
  std::string type_k, type_v, dtype;  // empty: not given
  bool rotate_k = false;              // --cache-rotate
  void Add(CLI::App* cmd);
  // f16 for what was not given; an unknown name is an error listing the valid ones.
  StatusOr<KvCacheTypes> ToTypes() const;
  // `ferry bench` takes comma-separated lists, as llama-bench's -ctk / -ctv do: every K type
  // with every V type (--kv-cache-dtype a,b: a/a and b/b), in the order given.
  StatusOr<std::vector<KvCacheTypes>> ToTypeList() const;
};

// Options shared by commands that load a model.
struct ModelFlags {
  std::string model;
  std::string tokenizer;
  int threads = 0;
  bool no_repack = false;
  bool exact_gelu = false;  // --exact-gelu
  SparsityFlags sparsity;   // added with the compute options (with_threads)
  KvCacheFlags kv_cache;    // the same
  // default_model: -m is optional and ModelOrDefault() falls back to the bundled model.
  void Add(CLI::App* cmd, bool with_threads = true, bool default_model = false);
  // `model`, or the bundled stories260K (models/stories260K/, said so on stderr) when empty.
  std::string ModelOrDefault() const;
  LoadOptions ToLoadOptions() const {
    LoadOptions o;
    o.tokenizer_path = tokenizer;
    o.repack_weights = !no_repack;
    o.exact_gelu = exact_gelu;
    o.sparsity = sparsity.options;
    return o;
  }
};

// What a speculative-decoding config points at: a loaded draft model or a quantized
// self-draft. Keep it alive as long as the engine that uses it.
struct SpecDraft {
  std::optional<LoadedModel> model;
  std::optional<spec::QuantizedDraft> quantized;
};

// Speculative-decoding flags shared by `ferry run`, `ferry serve` and `ferry bench`
// (spec_flags.cc): --draft-model, --draft-quant q4, --spec-ngram, --spec-tokens.
struct SpecFlags {
  std::string draft_model;
  std::string draft_quant;  // "q4": the target's own weights quantized to q4_0 in memory
  int spec_tokens = 4;
  int spec_ngram = 0;
  bool no_adaptive = false;
  void Add(CLI::App* cmd);
  bool enabled() const { return !draft_model.empty() || !draft_quant.empty() || spec_ngram > 0; }
  // Loads or builds the draft into `draft` and fills `config`; errors name the flag.
  Status Apply(const LoadedModel& target, const LoadOptions& load, ThreadPool* pool, SpecDraft& draft,
               spec::SpecConfig& config) const;
};

}  // namespace ferry::cli
