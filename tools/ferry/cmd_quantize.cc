// `ferry quantize`: RTN / AWQ INT4 weight-only (w4a16) and naive / SmoothQuant W8A8 (w8a8)
// GGUF files, with the recipe in metadata (docs/quantization.md).
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "commands.h"
#include "engine/perplexity.h"
#include "quant/autoawq_export.h"
#include "quant/awq.h"
#include "quant/int4_payloads.h"
#include "quant/int4_quant.h"
#include "quant/quant_writer.h"
#include "quant/smoothquant.h"
#include "quant_cli_util.h"

namespace ferry::cli {
namespace {

struct QuantizeOpts {
  std::string model, tokenizer, out, scheme, method, export_kind, export_dir, preview;
  int32_t preview_ctx = 256;
  std::vector<std::string> export_args;  // {kind, dir}
  int64_t group = 128;
  double alpha = -1;  // smoothquant default 0.5
  bool static_act = false, no_clip = false, mlp_objective = false, duo = false;
  CalibFlags calib;
  int threads = 0;
};

Status Check(const QuantizeOpts& o) {
  if (o.scheme != "w4a16" && o.scheme != "w8a8")
    return InvalidArgumentError("--scheme '{}': choose w4a16 or w8a8", o.scheme);
  if (o.method != "rtn" && o.method != "awq" && o.method != "smoothquant")
    return InvalidArgumentError("--method '{}': choose rtn, awq or smoothquant", o.method);
  if (o.method == "awq" && o.scheme != "w4a16")
    return InvalidArgumentError("--method awq needs --scheme w4a16");
  if (o.method == "smoothquant" && o.scheme != "w8a8")
    return InvalidArgumentError("--method smoothquant needs --scheme w8a8");
  if (o.group != 32 && o.group != 64 && o.group != 128)
    return InvalidArgumentError("--group-size {}: choose 32, 64 or 128", o.group);
  if (!o.export_kind.empty() && o.export_kind != "autoawq")
    return InvalidArgumentError("--export '{}': only autoawq is supported", o.export_kind);
  if (!o.export_kind.empty() && o.scheme != "w4a16")
    return InvalidArgumentError("--export autoawq needs --scheme w4a16");
  return Status::Ok();
}

// W8A8 perplexity emulated in f32 (int8 weights dequantized, activations rounded per token or
// with the static scale exactly as the W8A8 contract specifies) for when the runtime lacks the
// INT8 kernels; windows and scoring as `ferry ppl`.
Status PreviewW8A8(const quant::FloatModel& m, const quant::PayloadMap& payloads, const QuantInputs& in,
                   const std::string& text_path, int32_t ctx, ThreadPool& pool) {
  if (!in.tokenizer) return InvalidArgumentError("--preview-ppl needs the model's tokenizer");
  std::ifstream f(text_path, std::ios::binary);
  if (!f) return IoError("cannot open text file '{}'", text_path);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::vector<int32_t> tokens = in.tokenizer->Encode(ss.str(), true, false);
  const quant::FloatModel fq = quant::FakeQuantW8A8Model(m, payloads);
  const std::unique_ptr<formats::WeightSource> src = fq.AsWeightSource();
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, quant::FloatModel::Build(*src));
  const ActivationTaps taps{nullptr, quant::W8A8ActHook(payloads)};
  PerplexityOptions po;
  po.n_ctx = ctx;
  po.n_batch = ctx;
  po.taps = &taps;
  const int32_t bos = in.tokenizer->add_bos() ? in.tokenizer->bos_id() : -1;
  FERRY_ASSIGN_OR_RETURN(PerplexityResult r, Perplexity(*model, bos, pool, tokens, po));
  std::printf("emulated W8A8 PPL = %.4f (%lld predictions, windows of %d)\n", r.ppl,
              static_cast<long long>(r.n_scored), ctx);
  return Status::Ok();
}

int Run(QuantizeOpts& o) {
  if (o.export_args.size() == 2) {
    o.export_kind = o.export_args[0];
    o.export_dir = o.export_args[1];
  }
  if (Status st = Check(o); !st.ok()) return Fail(st);
  auto in = LoadForQuant(o.model, o.tokenizer);
  if (!in.ok()) return Fail(in.status());
  ThreadPool pool(o.threads);
  quant::FloatModel& m = in->model;
  std::optional<quant::CalibStats> stats;
  if (o.method != "rtn" || o.static_act) {
    auto s = GetCalibration(*in, o.calib, pool);
    if (!s.ok()) return Fail(s.status());
    stats = std::move(*s);
  }
  quant::QuantRecipe recipe;
  recipe.method = o.method;
  recipe.scheme = o.scheme;
  if (stats) recipe.calibration = stats->Describe();
  quant::PayloadMap payloads;
  if (o.scheme == "w4a16") {
    recipe.bits = 4;
    recipe.group_size = o.group;
    recipe.file_type = static_cast<int32_t>(quant::Int4TypeForGroup(o.group));
    quant::ClipMap clips;
    if (o.method == "awq") {
      quant::AwqOptions ao;
      ao.group = o.group;
      ao.clip = !o.no_clip;
      ao.mlp_objective = o.mlp_objective;
      ao.duo = o.duo;
      auto r = quant::ApplyAwq(m, *stats, ao);
      if (!r.ok()) return Fail(r.status());
      for (const auto& rep : r->report)
        std::fprintf(stderr, "ferry: awq layer %d %-11s alpha %.2f  output mse %.3g (rtn %.3g)\n", rep.layer,
                     InputName(InputOf(rep.kind)), rep.alpha, rep.err, rep.err_rtn);
      clips = std::move(r->clip);
      recipe.extra.push_back({"clip", o.no_clip ? "none" : "per-group search, 1.0..0.55"});
    }
    payloads = quant::Int4Payloads(m, o.group, o.method == "awq" ? &clips : nullptr);
  } else {
    recipe.bits = 8;
    if (o.method == "smoothquant") {
      recipe.alpha = o.alpha < 0 ? 0.5 : o.alpha;
      if (Status st = quant::ApplySmoothQuant(m, *stats, recipe.alpha); !st.ok()) return Fail(st);
    }
    quant::W8A8Options wo;
    wo.static_act = o.static_act;
    auto p = quant::QuantizeW8A8(m, stats ? &*stats : nullptr, wo);
    if (!p.ok()) return Fail(p.status());
    payloads = std::move(*p);
    recipe.extra.push_back(
        {"activations", o.static_act ? "int8 static per-tensor" : "int8 dynamic per-token"});
  }
  if (Status st = quant::WriteQuantizedGguf(o.out, *in->source, m, payloads, recipe); !st.ok())
    return Fail(st);
  if (!o.export_kind.empty()) {
    auto rep = quant::ExportAutoAwq(o.export_dir, m, payloads, o.group);
    if (!rep.ok()) return Fail(rep.status());
    std::printf("exported %s (AutoAWQ GEMM): %d linears packed, %zu kept dense (modules_to_not_convert)\n",
                o.export_dir.c_str(), rep->converted, rep->not_converted.size());
  }
  if (!o.preview.empty() && o.scheme == "w8a8") {
    if (Status st = PreviewW8A8(m, payloads, *in, o.preview, o.preview_ctx, pool); !st.ok()) return Fail(st);
  }
  uint64_t lin_bytes = 0, lin_params = 0;
  for (const auto& [key, p] : payloads) {
    const quant::FloatLinear& lin = m.layers[static_cast<size_t>(key.first)][key.second];
    lin_bytes += p.bytes.size() + p.weight_scale.size() * 4 + (p.input_scale ? 4 : 0);
    lin_params += static_cast<uint64_t>(lin.n_out * lin.n_in);
  }
  std::printf("wrote %s: %llu bytes; block linears %.3f bits/weight\n", o.out.c_str(),
              static_cast<unsigned long long>(FileSize(o.out)),
              8.0 * static_cast<double>(lin_bytes) / static_cast<double>(lin_params));
  return 0;
}

}  // namespace

Runner AddQuantizeCommand(CLI::App& app) {
  auto o = std::make_shared<QuantizeOpts>();
  CLI::App* cmd =
      app.add_subcommand("quantize", "quantize a model: RTN/AWQ int4 weight-only or naive/SmoothQuant W8A8");
  cmd->add_option("-m,--model", o->model, "model: GGUF file, Hugging Face folder or llama2.c .bin")
      ->required();
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer file");
  cmd->add_option("--scheme", o->scheme, "w4a16 (int4 weights) or w8a8 (int8 weights and activations)")
      ->required();
  cmd->add_option("--method", o->method, "rtn, awq (w4a16) or smoothquant (w8a8)")->required();
  cmd->add_option("--group-size", o->group, "int4 group size: 32, 64 or 128")->capture_default_str();
  cmd->add_option("--alpha", o->alpha, "SmoothQuant migration strength in [0, 1] (default 0.5)");
  cmd->add_option("--calib", o->calib.calib, "calibration text, or a STATS file from `ferry calibrate`");
  cmd->add_option("--calib-samples", o->calib.samples, "calibration windows")->capture_default_str();
  cmd->add_option("--calib-ctx", o->calib.ctx, "tokens per calibration window")->capture_default_str();
  cmd->add_option("--calib-rows", o->calib.rows, "sampled input rows per linear input")
      ->capture_default_str();
  cmd->add_option("--preview-ppl", o->preview,
                  "w8a8: also print the emulated W8A8 perplexity over this text");
  cmd->add_option("--preview-ctx", o->preview_ctx, "window size for --preview-ppl")->capture_default_str();
  cmd->add_flag("--static-act", o->static_act, "w8a8: static per-tensor activation scales from calibration");
  cmd->add_flag("--no-clip", o->no_clip, "awq: skip the weight clipping search");
  cmd->add_flag("--awq-duo", o->duo, "awq: AutoAWQ's duo scaling s = s_X^a / w_mean^(1-a)");
  cmd->add_flag("--awq-mlp-objective", o->mlp_objective,
                "awq: score gate/up scales on the FFN output (AutoAWQ's module)");
  cmd->add_option("--export", o->export_args, "also export: autoawq DIR (AutoAWQ GEMM safetensors folder)")
      ->expected(2);
  cmd->add_option("-t,--threads", o->threads, "threads (default: physical cores)");
  cmd->add_option("-o,--output", o->out, "output GGUF")->required();
  return [o]() -> int { return Run(*o); };
}

}  // namespace ferry::cli
