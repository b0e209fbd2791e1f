#include "engine/loaded_model.h"

#include <filesystem>

#include "formats/loaded_source.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

// Finds and loads tokenizer metadata for sources that do not embed it.
StatusOr<Metadata> LoadSideTokenizer(const std::string& model_path, const Metadata& md,
                                     const LoadOptions& options) {
  const int32_t vocab = static_cast<int32_t>(
      md.GetInt(md.GetString("general.architecture").value_or("llama") + ".vocab_size").value_or(0));
  auto load_file = [&](const fs::path& p) -> StatusOr<Metadata> {
    std::string name = p.filename().string();
    if (p.extension() == ".json") return LoadHfTokenizerJson(p.string());
    if (p.extension() == ".model") return LoadSentencePieceModel(p.string());
    return LoadLlama2cTokenizer(p.string(), vocab);
  };
  if (!options.tokenizer_path.empty()) return load_file(options.tokenizer_path);

  fs::path base(model_path);
  std::vector<fs::path> candidates;
  if (fs::is_directory(base)) {
    candidates = {base / "tokenizer.json", base / "tokenizer.model"};
  } else {
    fs::path dir = base.parent_path();
    if (dir.empty()) dir = ".";
    candidates = {dir / "tokenizer.bin", dir / ("tok" + std::to_string(vocab) + ".bin")};
  }
  for (const auto& c : candidates)
    if (fs::exists(c)) return load_file(c);
  std::string tried;
  for (const auto& c : candidates) tried += (tried.empty() ? "" : ", ") + c.string();
  return NotFoundError("'{}' has no tokenizer; looked for {}; pass one with --tokenizer", model_path, tried);
}

}  // namespace

namespace {

// A tokenizer without weights: a tokenizer.json / encoder.json file, or a folder holding one
// but no config.json (e.g. a downloaded tokenizer). `ferry tokenize` works on these.
bool IsTokenizerOnly(const fs::path& p) {
  if (fs::is_directory(p))
    return !fs::exists(p / "config.json") &&
           (fs::exists(p / "tokenizer.json") || fs::exists(p / "tokenizer.model"));
  return p.extension() == ".json";
}

}  // namespace

StatusOr<std::unique_ptr<formats::WeightSource>> OpenWithTokenizer(const std::string& path,
                                                                   const LoadOptions& options) {
  std::unique_ptr<formats::WeightSource> source;
  if (IsTokenizerOnly(path)) {
    auto empty = std::make_unique<formats::LoadedWeightSource>(path);
    empty->mutable_metadata().SetString("ferry.source.format", "tokenizer only");
    source = std::move(empty);
  } else {
    FERRY_ASSIGN_OR_RETURN(source, formats::OpenWeightSource(path));
  }
  if (!source->metadata().Has("tokenizer.ggml.tokens") || !options.tokenizer_path.empty()) {
    LoadOptions side = options;
    if (side.tokenizer_path.empty() && !fs::is_directory(path) && IsTokenizerOnly(path))
      side.tokenizer_path = path;
    FERRY_ASSIGN_OR_RETURN(Metadata tok_md, LoadSideTokenizer(path, source->metadata(), side));
    // An explicit tokenizer replaces the embedded one whole: stale keys (scores of another
    // vocabulary) must not survive the merge.
    source->mutable_metadata().EraseWithPrefix("tokenizer.");
    for (const auto& [key, value] : tok_md.entries()) source->mutable_metadata().Set(key, value);
  }
  return source;
}

StatusOr<LoadedModel> LoadModel(const std::string& path, const LoadOptions& options) {
  LoadedModel lm;
  FERRY_ASSIGN_OR_RETURN(lm.source, OpenWithTokenizer(path, options));
  FERRY_ASSIGN_OR_RETURN(lm.model,
                         CreateModel(*lm.source, ModelOptions{options.repack_weights, options.sparsity,
                                                              options.parallel, options.exact_gelu}));
  FERRY_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::FromMetadata(lm.source->metadata()));
  if (tok.n_vocab() > lm.model->config().n_vocab)
    return InvalidArgumentError("'{}': tokenizer has {} tokens but the model only {} rows of embeddings",
                                path, tok.n_vocab(), lm.model->config().n_vocab);
  lm.tokenizer.emplace(std::move(tok));
  return lm;
}

}  // namespace ferry
