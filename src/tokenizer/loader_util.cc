#include "tokenizer/loader_util.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

namespace ferry::tokenizer_internal {

Metadata ToMetadata(const SpmVocabSpec& spec) {
  Metadata md;
  md.SetString("tokenizer.ggml.model", "llama");
  md.SetStringArray("tokenizer.ggml.tokens", spec.tokens);
  md.SetFloatArray("tokenizer.ggml.scores", spec.scores);
  md.SetIntArray("tokenizer.ggml.token_type", spec.types);
  if (spec.bos >= 0) md.SetUint("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(spec.bos));
  if (spec.eos >= 0) md.SetUint("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(spec.eos));
  if (spec.unk >= 0) md.SetUint("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(spec.unk));
  if (spec.pad >= 0) md.SetUint("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(spec.pad));
  md.SetBool("tokenizer.ggml.add_bos_token", spec.add_bos);
  md.SetBool("tokenizer.ggml.add_eos_token", spec.add_eos);
  md.SetBool("tokenizer.ggml.add_space_prefix", spec.add_space_prefix);
  return md;
}

Metadata ToMetadata(const BpeVocabSpec& spec) {
  Metadata md;
  md.SetString("tokenizer.ggml.model", spec.model);
  md.SetString("tokenizer.ggml.pre", spec.pre);
  md.SetStringArray("tokenizer.ggml.tokens", spec.tokens);
  md.SetIntArray("tokenizer.ggml.token_type", spec.types);
  if (!spec.merges.empty()) md.SetStringArray("tokenizer.ggml.merges", spec.merges);
  auto set_id = [&](const char* key, int32_t id) {
    if (id >= 0) md.SetUint(key, static_cast<uint32_t>(id));
  };
  set_id("tokenizer.ggml.bos_token_id", spec.bos);
  set_id("tokenizer.ggml.eos_token_id", spec.eos);
  set_id("tokenizer.ggml.unknown_token_id", spec.unk);
  set_id("tokenizer.ggml.padding_token_id", spec.pad);
  set_id("tokenizer.ggml.cls_token_id", spec.cls);
  set_id("tokenizer.ggml.seperator_token_id", spec.sep);  // llama.cpp's spelling
  set_id("tokenizer.ggml.mask_token_id", spec.mask);
  if (spec.add_bos) md.SetBool("tokenizer.ggml.add_bos_token", *spec.add_bos);
  if (spec.add_eos) md.SetBool("tokenizer.ggml.add_eos_token", *spec.add_eos);
  if (spec.lowercase) md.SetBool("tokenizer.ferry.lowercase", *spec.lowercase);
  if (spec.strip_accents) md.SetBool("tokenizer.ferry.strip_accents", *spec.strip_accents);
  return md;
}

StatusOr<std::string> ReadWholeFile(const std::string& path, size_t max_bytes) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return NotFoundError("{}: no such file", path);
  if (std::filesystem::is_directory(path, ec)) return InvalidArgumentError("{}: is a directory", path);
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) return IoError("{}: cannot open: {}", path, std::strerror(errno));
  std::string data;
  char buf[1 << 16];
  while (true) {
    size_t got = std::fread(buf, 1, sizeof(buf), f.get());
    if (got > 0) {
      if (data.size() + got > max_bytes) return IoError("{}: larger than {} bytes", path, max_bytes);
      data.append(buf, got);
    }
    if (got < sizeof(buf)) {
      if (std::ferror(f.get())) return IoError("{}: read failed", path);
      break;
    }
  }
  return data;
}

bool IsByteTokenName(const std::string& s) {
  auto hex = [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f');
  };
  return s.size() == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && hex(s[3]) && hex(s[4]) &&
         s[5] == '>';
}

}  // namespace ferry::tokenizer_internal
