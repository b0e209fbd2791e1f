// `ferry prune`: magnitude or Wanda pruning, unstructured (--sparsity) or n:m (--pattern 2:4),
// of every block's linear layers; reports the achieved sparsity per layer.
#include <cstdio>
#include <memory>

#include "commands.h"
#include "quant/prune.h"
#include "quant/quant_writer.h"
#include "quant_cli_util.h"

namespace ferry::cli {

Runner AddPruneCommand(CLI::App& app) {
  struct Opts {
    std::string model, tokenizer, out, method = "magnitude", pattern;
    double sparsity = -1;
    CalibFlags calib;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("prune", "prune linear layers: magnitude or wanda, unstructured or 2:4");
  cmd->add_option("-m,--model", o->model, "model: GGUF file, Hugging Face folder or llama2.c .bin")
      ->required();
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer file");
  cmd->add_option("--method", o->method, "magnitude or wanda")->capture_default_str();
  cmd->add_option("--sparsity", o->sparsity, "fraction of each row's weights set to 0, in [0, 1)");
  cmd->add_option("--pattern", o->pattern, "N:M semi-structured sparsity: N of every M consecutive inputs kept, e.g. 2:4");
  cmd->add_option("--calib", o->calib.calib, "calibration text or STATS file (wanda)");
  cmd->add_option("--calib-samples", o->calib.samples, "calibration windows")->capture_default_str();
  cmd->add_option("--calib-ctx", o->calib.ctx, "tokens per calibration window")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "threads (default: physical cores)");
  cmd->add_option("-o,--output", o->out, "output GGUF")->required();
  return [o]() -> int {
    quant::PruneOptions po;
    if (o->method == "magnitude") {
      po.method = quant::PruneMethod::kMagnitude;
    } else if (o->method == "wanda") {
      po.method = quant::PruneMethod::kWanda;
    } else {
      return Fail(InvalidArgumentError("--method '{}': choose magnitude or wanda", o->method));
    }
    if ((o->sparsity >= 0) == !o->pattern.empty())
      return Fail(InvalidArgumentError("pass exactly one of --sparsity S or --pattern N:M"));
    if (!o->pattern.empty()) {
      if (std::sscanf(o->pattern.c_str(), "%d:%d", &po.n, &po.m) != 2)
        return Fail(InvalidArgumentError("--pattern '{}': expected N:M such as 2:4", o->pattern));
    } else {
      po.sparsity = o->sparsity;
    }
    auto in = LoadForQuant(o->model, o->tokenizer);
    if (!in.ok()) return Fail(in.status());
    ThreadPool pool(o->threads);
    std::optional<quant::CalibStats> stats;
    if (po.method == quant::PruneMethod::kWanda) {
      auto s = GetCalibration(*in, o->calib, pool);
      if (!s.ok()) return Fail(s.status());
      stats = std::move(*s);
    }
    auto rep = quant::PruneModel(in->model, stats ? &*stats : nullptr, po);
    if (!rep.ok()) return Fail(rep.status());
    int64_t zeros = 0, total = 0;
    for (const auto& r : *rep) {
      std::printf("layer %d %-12s sparsity %.4f (%lld / %lld)\n", r.layer, LinearStem(r.kind),
                  static_cast<double>(r.zeros) / static_cast<double>(r.total),
                  static_cast<long long>(r.zeros), static_cast<long long>(r.total));
      zeros += r.zeros;
      total += r.total;
    }
    quant::QuantRecipe recipe;
    recipe.method = o->method;
    recipe.scheme = "sparse";
    if (stats) recipe.calibration = stats->Describe();
    recipe.extra.push_back({"sparsity", o->pattern.empty() ? std::to_string(po.sparsity) : o->pattern});
    if (Status st = quant::WriteQuantizedGguf(o->out, *in->source, in->model, {}, recipe); !st.ok())
      return Fail(st);
    std::printf("wrote %s: block linears sparsity %.4f\n", o->out.c_str(),
                static_cast<double>(zeros) / static_cast<double>(total));
    return 0;
  };
}

}  // namespace ferry::cli
