// `ferry make-model`: a GGUF with random weights and a real model's shapes.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>

#include "base/progress.h"
#include "base/timer.h"
#include "commands.h"
#include "synthetic/synthetic_model.h"

namespace ferry::cli {

Runner AddMakeModelCommand(CLI::App& app) {
  struct Opts {
    std::string preset = "tiny", type = "f16", out;
    uint64_t seed = 1234;
    int threads = 0;
    float input_scale = 0.f;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("make-model", "write a random-weight GGUF with a real model's shapes");
  std::string presets;
  for (const auto& p : ModelPresets()) presets += (presets.empty() ? "" : ", ") + p.name;
  cmd->add_option("--preset", o->preset, "shape preset: " + presets)->capture_default_str();
  cmd->add_option(
         "--type", o->type,
         "weight type: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q6_k, int4_g128, w8a8, q4_k_m "
         "(llama.cpp's Q4_K_M mix of q4_k and q6_k), or mxfp4 (MoE presets: experts mxfp4, the rest q8_0, "
         "llama.cpp's MXFP4_MOE)")
      ->capture_default_str();
  cmd->add_option("-o,--output", o->out, "output .gguf file")->required();
  cmd->add_option("--seed", o->seed, "weights seed")->capture_default_str();
  cmd->add_option("--input-scale", o->input_scale,
                  "w8a8 only: static per-tensor activation scale written for every linear (default: none, "
                  "per-token dynamic)");
  cmd->add_option("-t,--threads", o->threads, "threads (default: physical cores)");

  return [o]() -> int {
    std::string name = o->type;
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    const bool q4_k_m = name == "q4_k_m";
    auto type = name == "w8a8" ? std::optional<DType>(DType::kI8) : DTypeFromName(q4_k_m ? "q4_k" : name);
    if (!type) return Fail(InvalidArgumentError("unknown --type '{}'", o->type));
    SyntheticModelOptions opts;
    opts.preset = o->preset;
    opts.type = *type;
    opts.q4_k_m = q4_k_m;
    opts.seed = o->seed;
    opts.w8a8_input_scale = o->input_scale;
    opts.threads = o->threads;
    opts.show_progress = StderrIsTerminal();
    Timer timer;
    Status st = WriteSyntheticModel(o->out, opts);
    if (!st.ok()) return Fail(st);
    std::fprintf(stderr, "ferry: wrote %s (%s, %s) in %.1f s\n", o->out.c_str(), o->preset.c_str(),
                 o->type.c_str(), timer.Seconds());
    return 0;
  };
}

}  // namespace ferry::cli
