// `ferry info`: what a model file holds (architecture, parameters, tensor types, tokenizer).
#include <cstdio>
#include <map>
#include <memory>

#include "commands.h"
#include "engine/loaded_model.h"
#include "model/model_config.h"
#include "tokenizer/tokenizer.h"

namespace ferry::cli {
namespace {

std::string HumanBytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  return fmt::format("{:.2f} {}", b, units[u]);
}

}  // namespace

Runner AddInfoCommand(CLI::App& app) {
  struct Opts {
    ModelFlags model;
    bool tensors = false, metadata = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("info", "describe a model file");
  o->model.Add(cmd, /*with_threads=*/false);
  cmd->add_flag("--tensors", o->tensors, "list every tensor");
  cmd->add_flag("--metadata", o->metadata, "list every metadata key");

  return [o]() -> int {
    auto src_or = OpenWithTokenizer(o->model.model, LoadOptions{o->model.tokenizer});
    if (!src_or.ok()) return Fail(src_or.status());
    const formats::WeightSource& src = **src_or;
    const Metadata& md = src.metadata();
    std::printf("file:           %s\n", src.path().c_str());
    std::printf("format:         %s\n", md.GetString("ferry.source.format").value_or("?").c_str());
    std::printf("architecture:   %s\n", md.GetString("general.architecture").value_or("(none)").c_str());
    if (auto name = md.GetString("general.name")) std::printf("name:           %s\n", name->c_str());

    int64_t params = 0;
    std::map<std::string, std::pair<int, size_t>> by_type;  // type -> (count, bytes)
    for (const auto& t : src.tensors()) {
      params += t.NumElements();
      auto& e = by_type[DTypeName(t.dtype)];
      e.first++;
      e.second += t.nbytes;
    }
    std::printf("parameters:     %lld (%.2f M)\n", static_cast<long long>(params), params / 1e6);
    std::printf("tensors:        %zu, %s\n", src.tensors().size(), HumanBytes(static_cast<double>(src.TensorBytes())).c_str());
    for (const auto& [type, e] : by_type)
      std::printf("  %-6s        %4d tensors, %s\n", type.c_str(), e.first, HumanBytes(static_cast<double>(e.second)).c_str());
    if (params > 0)
      std::printf("bits/weight:    %.2f\n", 8.0 * static_cast<double>(src.TensorBytes()) / static_cast<double>(params));

    auto cfg = ModelConfig::FromMetadata(md);
    if (cfg.ok()) {
      std::printf("context length: %d\n", cfg->n_ctx_train);
      std::printf("layers:         %d, dim %d, ffn %d, heads %d (kv %d), head dim %d\n", cfg->n_layers, cfg->dim,
                  cfg->ffn_dim, cfg->n_heads, cfg->n_kv_heads, cfg->head_dim);
      std::printf("rope:           theta %g, dims %d, %s\n", cfg->rope_theta, cfg->rot_dim, cfg->rope_neox ? "neox" : "normal");
      std::printf("rms norm eps:   %g\n", cfg->rms_eps);
      // Building the model (weights in place, nothing repacked) checks every tensor `ferry run`
      // needs: a missing or zero-sized one makes the file not runnable.
      if (auto model = CreateModel(src, ModelOptions{/*repack_weights=*/false}); !model.ok())
        std::printf("model:          not runnable: %s\n", model.status().message().c_str());
    } else if (src.tensors().empty()) {
      std::printf("model:          none (vocabulary only)\n");
    } else {
      std::printf("model:          not runnable: %s\n", cfg.status().message().c_str());
    }
    auto tok = Tokenizer::FromMetadata(md);
    if (tok.ok()) {
      std::printf("tokenizer:      %s, %d tokens, bos %d, eos %d, add bos %s\n", tok->model_name().c_str(),
                  tok->n_vocab(), tok->bos_id(), tok->eos_id(), tok->add_bos() ? "yes" : "no");
    } else {
      std::printf("tokenizer:      unavailable: %s\n", tok.status().message().c_str());
    }
    if (o->metadata)
      for (const auto& [key, value] : md.entries()) std::printf("  %-48s %s\n", key.c_str(), value.ToString().c_str());
    if (o->tensors)
      for (const auto& t : src.tensors())
        std::printf("  %-40s %-6s %-20s %zu bytes\n", t.name.c_str(), DTypeName(t.dtype), t.ShapeString().c_str(), t.nbytes);
    return 0;
  };
}

}  // namespace ferry::cli
