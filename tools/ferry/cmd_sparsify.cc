// `ferry sparsify`: calibrates contextual FFN sparsity for a model (quant/ffn_sparsify.h):
// per-layer |SiLU(gate)| thresholds on a 1% sparsity grid and a low-rank neuron predictor,
// written as a small sidecar GGUF (docs/formats.md "FFN sparsity sidecar") that
// --ffn-stats / --ffn-predictor read at run time.
#include <cstdio>
#include <memory>

#include "base/progress.h"
#include "commands.h"
#include "quant/ffn_sparsify.h"
#include "quant_cli_util.h"

namespace ferry::cli {

Runner AddSparsifyCommand(CLI::App& app) {
  struct Opts {
    std::string model, tokenizer, out;
    CalibFlags calib;
    quant::FfnSparsifyOptions train;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand(
      "sparsify", "calibrate contextual FFN sparsity: per-layer thresholds and a low-rank neuron predictor");
  cmd->add_option("-m,--model", o->model, "model: GGUF file, Hugging Face folder or llama2.c .bin")
      ->required();
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer file");
  cmd->add_option("--calib", o->calib.calib, "calibration text (or a STATS file from `ferry calibrate`)")
      ->required();
  cmd->add_option("--calib-samples", o->calib.samples, "calibration windows")->capture_default_str();
  cmd->add_option("--calib-ctx", o->calib.ctx, "tokens per calibration window")->capture_default_str();
  cmd->add_option("--rows", o->calib.rows, "sampled FFN inputs per layer (thresholds and training)")
      ->capture_default_str();
  cmd->add_option("--sparsity", o->train.train_sparsity,
                  "the predictor learns which neurons survive this sparsity (its default at run time)")
      ->capture_default_str();
  cmd->add_option("--rank", o->train.rank, "predictor rank (0: min(64, dim/2))")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "threads (default: physical cores)");
  cmd->add_option("-o,--output", o->out, "sidecar file to write (GGUF of f32 tensors)")->required();
  return [o]() -> int {
    auto in = LoadForQuant(o->model, o->tokenizer);
    if (!in.ok()) return Fail(in.status());
    if (in->model.config.IsMoe())
      return Fail(UnsupportedError("'{}' is a mixture of experts; FFN sparsity needs dense FFNs", o->model));
    ThreadPool pool(o->threads);
    auto stats = GetCalibration(*in, o->calib, pool);
    if (!stats.ok()) return Fail(stats.status());
    ProgressBar bar("training predictors", in->model.config.n_layers, StderrIsTerminal());
    o->train.progress = [&](int32_t done, int32_t) { bar.Update(done); };
    auto file = quant::TrainFfnSparsity(in->model, *stats, o->train, &pool);
    bar.Finish();
    if (!file.ok()) return Fail(file.status());
    const double s = o->train.train_sparsity;
    for (int32_t l = 0; l < file->n_layers; ++l) {
      const quant::InputStats& x = stats->At(l, InputKind::kFfnIn);
      const std::vector<float> act = quant::AbsSiluGate(in->model, l, x.rows.data(), x.n_rows(), &pool);
      std::printf(
          "layer %d: |silu(gate)| threshold %.4g at sparsity %.2f; predictor recall %.3f (chance %.3f)\n", l,
          file->layers[static_cast<size_t>(l)].Threshold(s), s,
          quant::PredictorRecall(*file, l, x.rows.data(), act, x.n_rows(), s), 1.0 - s);
    }
    if (Status st = SaveFfnSparsity(o->out, *file); !st.ok()) return Fail(st);
    std::printf(
        "wrote %s: %d layers, thresholds every %d%%, predictor rank %d trained at sparsity %.2f on %s\n",
        o->out.c_str(), file->n_layers, 100 / kFfnGridSteps, file->rank, s, file->calib_source.c_str());
    return 0;
  };
}

}  // namespace ferry::cli
