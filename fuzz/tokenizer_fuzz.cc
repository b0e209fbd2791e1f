// libFuzzer target: encodes arbitrary bytes with the llama-spm (SPM) and gpt-2 (byte-level BPE)
// vocabularies (parse_special off and on) and checks the results stay in range, decode
// losslessly and stream as the sanitized text. The vocabularies are read once from
// $FERRY_ASSETS (default ../shared/assets relative to the working directory).
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <memory>
#include <string>

#include "formats/gguf.h"
#include "formats/weight_source.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

std::unique_ptr<ferry::Tokenizer> LoadVocab(const char* name) {
  const char* env = std::getenv("FERRY_ASSETS");
  std::string dir = env && *env ? env : "../shared/assets";
  auto src = ferry::formats::OpenGguf(dir + "/llama.cpp-vocab/ggml-vocab-" + name + ".gguf");
  if (!src.ok()) {
    std::fprintf(stderr, "tokenizer fuzz: %s (set FERRY_ASSETS)\n", src.status().ToString().c_str());
    std::abort();
  }
  auto t = ferry::Tokenizer::FromMetadata((*src)->metadata());
  if (!t.ok()) std::abort();
  return std::make_unique<ferry::Tokenizer>(std::move(t).value());
}

const ferry::Tokenizer* FuzzTokenizer() {
  static std::unique_ptr<ferry::Tokenizer> tok = LoadVocab("llama-spm");
  return tok.get();
}

const ferry::Tokenizer* FuzzBpeTokenizer() {
  static std::unique_ptr<ferry::Tokenizer> tok = LoadVocab("gpt-2");
  return tok.get();
}

// Byte-level BPE: every byte string (ill-formed UTF-8 too) round-trips exactly when special
// tokens are not parsed; with parsing, "<|endoftext|>" is rendered back only on request.
void CheckBpe(const std::string& text) {
  const ferry::Tokenizer* tok = FuzzBpeTokenizer();
  for (bool parse_special : {false, true}) {
    std::vector<int32_t> ids = tok->Encode(text, /*add_special=*/true, parse_special);
    for (int32_t id : ids) {
      if (id < 0 || id >= tok->n_vocab()) std::abort();
    }
    if (tok->Decode(ids, /*render_special=*/true) != text) std::abort();
    if (!parse_special && tok->Decode(ids) != text) std::abort();
    ferry::IncrementalDetokenizer detok(*tok, /*render_special=*/true);
    std::string streamed;
    for (int32_t id : ids) streamed += detok.Push(id);
    streamed += detok.Flush();
    if (streamed != ferry::utf8::Sanitize(text)) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const ferry::Tokenizer* tok = FuzzTokenizer();
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (bool parse_special : {false, true}) {
    std::vector<int32_t> ids = tok->Encode(text, /*add_special=*/true, parse_special);
    for (int32_t id : ids) {
      if (id < 0 || id >= tok->n_vocab()) std::abort();
    }
    const std::string decoded = tok->Decode(ids);
    // Without special parsing SPM with byte fallback is lossless up to the space prefix and
    // U+2581 (which may decode to ' ' or stay, see detokenizer_test.cc).
    if (!parse_special &&
        ferry::utf8::UnescapeSpaces(decoded) != ferry::utf8::UnescapeSpaces(text.empty() ? std::string() : std::string(1, ' ').append(text))) {
      std::abort();
    }
    ferry::IncrementalDetokenizer detok(*tok);
    std::string streamed;
    for (int32_t id : ids) streamed += detok.Push(id);
    streamed += detok.Flush();
    if (!ferry::utf8::IsValid(streamed) || streamed != ferry::utf8::Sanitize(decoded)) std::abort();
  }
  CheckBpe(text);
  return 0;
}
