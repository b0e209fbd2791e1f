// `ferry calibrate`: runs the full-precision model over calibration text and saves per-channel
// statistics and sampled input rows of every linear layer, and each attention head's importance
// for --prune-heads (quant/calibration.h).
#include <cstdio>
#include <memory>

#include "commands.h"
#include "quant_cli_util.h"

namespace ferry::cli {

Runner AddCalibrateCommand(CLI::App& app) {
  struct Opts {
    std::string model, tokenizer, out;
    CalibFlags calib;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd =
      app.add_subcommand("calibrate",
                         "record activation statistics of every linear layer's input and per-head importance");
  cmd->add_option("-m,--model", o->model, "model: GGUF file, Hugging Face folder or llama2.c .bin")
      ->required();
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer file");
  cmd->add_option("-f,--file", o->calib.calib, "calibration text")->required();
  cmd->add_option("--samples", o->calib.samples, "windows of --ctx tokens to run")->capture_default_str();
  cmd->add_option("--ctx", o->calib.ctx, "tokens per window")->capture_default_str();
  cmd->add_option("--rows", o->calib.rows, "sampled input rows kept per linear input")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "threads (default: physical cores)");
  cmd->add_option("-o,--output", o->out, "statistics file (GGUF of f32 tensors)")->required();
  return [o]() -> int {
    auto in = LoadForQuant(o->model, o->tokenizer);
    if (!in.ok()) return Fail(in.status());
    ThreadPool pool(o->threads);
    auto stats = GetCalibration(*in, o->calib, pool);
    if (!stats.ok()) return Fail(stats.status());
    if (Status st = quant::SaveCalibStats(o->out, *stats); !st.ok()) return Fail(st);
    std::printf("wrote %s: %zu layers x 4 inputs, %lld rows sampled per input\n", o->out.c_str(),
                stats->layers.size(),
                static_cast<long long>(stats->layers.empty() ? 0 : stats->layers[0][0].n_rows()));
    return 0;
  };
}

}  // namespace ferry::cli
