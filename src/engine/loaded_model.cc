#include "engine/loaded_model.h"

#include <filesystem>

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

StatusOr<std::unique_ptr<formats::WeightSource>> OpenWithTokenizer(const std::string& path,
                                                                   const LoadOptions& options) {
  FERRY_ASSIGN_OR_RETURN(auto source, formats::OpenWeightSource(path));
  if (!source->metadata().Has("tokenizer.ggml.tokens") || !options.tokenizer_path.empty()) {
    FERRY_ASSIGN_OR_RETURN(Metadata tok_md, LoadSideTokenizer(path, source->metadata(), options));
    for (const auto& [key, value] : tok_md.entries()) source->mutable_metadata().Set(key, value);
  }
  return source;
}

StatusOr<LoadedModel> LoadModel(const std::string& path, const LoadOptions& options) {
  LoadedModel lm;
  FERRY_ASSIGN_OR_RETURN(lm.source, OpenWithTokenizer(path, options));
  FERRY_ASSIGN_OR_RETURN(lm.model, CreateModel(*lm.source));
  FERRY_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::FromMetadata(lm.source->metadata()));
  if (tok.n_vocab() > lm.model->config().n_vocab)
    return InvalidArgumentError("'{}': tokenizer has {} tokens but the model only {} rows of embeddings", path,
                                tok.n_vocab(), lm.model->config().n_vocab);
  lm.tokenizer.emplace(std::move(tok));
  return lm;
}

}  // namespace ferry
