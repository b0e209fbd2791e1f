// The regex lists below state the same splits as llama.cpp's llm_tokenizer_bpe (src/llama-vocab.cpp)
// for each pre-tokenizer family, written for PCRE2: llama.cpp runs most of them through
// std::regex on a "collapsed" text (each code point replaced by a byte standing for its
// category) or through hand-written splitters; with PCRE2_UCP the Unicode properties are matched
// directly, which gives the same pieces. Where llama.cpp adapted a Hugging Face pattern for
// std::regex (the case-insensitive contractions of llama3/qwen2 written as [sS]), the adapted
// form is used, since that is what produced the reference tokens.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pre_tokenizer.h"

#include <pcre2.h>

#include "base/log.h"
#include "tokenizer/utf8.h"

namespace ferry {
namespace {

// Unicode White_Space, as items of a character class.
constexpr std::string_view kSpaceItems =
    "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// deepseek-llm's letters: an explicit list of ranges (not \p{L}).
constexpr const char* kDeepseekLlmLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)";
constexpr const char* kDeepseekCjk = R"([\x{4E00}-\x{9FA5}\x{800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";
constexpr const char* kBloom = R"( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)";
constexpr const char* kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Family {
  std::vector<std::string_view> names;
  std::vector<const char*> patterns;
  bool ignore_merges = false;
  bool add_bos = false;
};

const std::vector<Family>& Families() {
  static const std::vector<Family> families = {
      {{"", "default"}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
      {{"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "dbrx", "smaug-bpe",
        "chatglm-bpe"},
       {kLlama3}, /*ignore_merges=*/true, /*add_bos=*/true},
      {{"deepseek-llm"},
       {"[\\r\\n]", kDeepseekLlmLetters,
        R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)",
        R"(\s+$)", kDeepseekCjk, R"(\p{N}+)"}},
      {{"deepseek-coder"}, {"[\\r\\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kDeepseekCjk, R"(\p{N})"}},
      {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
       {R"(\p{N})", kGpt2}},
      {{"gpt-2", "gpt2", "mpt", "olmo", "jais", "phi-2", "jina-es", "jina-de", "jina-v1-en",
        "jina-v2-es", "jina-v2-de", "jina-v2-code", "roberta-bpe", "trillion"},
       {kGpt2}},
      {{"qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan"}, {kQwen2}},
      {{"poro-chat", "bloom", "gpt3-finnish"}, {kBloom}},
      {{"viking"}, {kBloom, R"(\p{N})"}},
      {{"tekken"}, {kTekken}, /*ignore_merges=*/true, /*add_bos=*/true},
      {{"gpt-4o"}, {kGpt4o}},
  };
  return families;
}

const Family* FindFamily(std::string_view pre) {
  for (const Family& f : Families()) {
    for (std::string_view n : f.names) {
      if (n == pre) return &f;
    }
  }
  return nullptr;
}

// Replaces \s and \S by explicit White_Space classes (PCRE2's \s in UCP mode misses U+0085).
std::string ExpandSpaces(std::string_view p) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      if (e == 's') {
        if (in_class) {
          out.append(kSpaceItems);
        } else {
          out.append("[").append(kSpaceItems).append("]");
        }
      } else if (e == 'S' && !in_class) {
        out.append("[^").append(kSpaceItems).append("]");
      } else {
        out.push_back(c);
        out.push_back(e);
      }
      ++i;
      continue;
    }
    if (c == '[' && !in_class) in_class = true;
    else if (c == ']' && in_class) in_class = false;
    out.push_back(c);
  }
  return out;
}

struct CodeDeleter {
  void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};

}  // namespace

struct PreTokenizer::Impl {
  std::vector<std::unique_ptr<pcre2_code, CodeDeleter>> codes;
  std::vector<bool> jit;
};

PreTokenizer::PreTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

StatusOr<PreTokenizer> PreTokenizer::FromPatterns(const std::vector<std::string>& patterns) {
  auto impl = std::make_unique<Impl>();
  for (const std::string& p : patterns) {
    const std::string expanded = ExpandSpaces(p);
    int err = 0;
    PCRE2_SIZE err_offset = 0;
    pcre2_code* code = pcre2_compile(
        reinterpret_cast<PCRE2_SPTR>(expanded.data()), expanded.size(),
        PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY, &err, &err_offset,
        nullptr);
    if (!code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      return InvalidArgumentError("pre-tokenizer regex '{}' does not compile at {}: {}", p,
                                  static_cast<size_t>(err_offset), reinterpret_cast<char*>(msg));
    }
    impl->codes.emplace_back(code);
    impl->jit.push_back(pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0);
  }
  return PreTokenizer(std::move(impl));
}

StatusOr<PreTokenizer> PreTokenizer::ForType(std::string_view pre) {
  const Family* f = FindFamily(pre);
  if (!f) return UnsupportedError("unknown pre-tokenizer type '{}' (tokenizer.ggml.pre)", pre);
  return FromPatterns(std::vector<std::string>(f->patterns.begin(), f->patterns.end()));
}

bool PreTokenizer::IgnoresMerges(std::string_view pre) {
  const Family* f = FindFamily(pre);
  return f && f->ignore_merges;
}

bool PreTokenizer::AddsBos(std::string_view pre) {
  const Family* f = FindFamily(pre);
  return f && f->add_bos;
}

void PreTokenizer::Split(std::string_view text, std::vector<Piece>& out) const {
  out.clear();
  if (text.empty()) return;
  out.push_back({0, static_cast<uint32_t>(text.size())});
  std::vector<Piece> next;
  pcre2_match_data* md = nullptr;
  // A larger JIT stack than the 32 KiB default: long runs of spaces backtrack deeply in \s+(?!\S).
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  pcre2_match_context* mctx = pcre2_match_context_create(nullptr);
  if (stack && mctx) pcre2_jit_stack_assign(mctx, nullptr, stack);
  const auto* subject_base = reinterpret_cast<PCRE2_SPTR>(text.data());
  for (size_t r = 0; r < impl_->codes.size(); ++r) {
    pcre2_code* code = impl_->codes[r].get();
    if (md) pcre2_match_data_free(md);
    md = pcre2_match_data_create_from_pattern(code, nullptr);
    next.clear();
    next.reserve(out.size() * 2);
    for (const Piece& piece : out) {
      const PCRE2_SPTR subject = subject_base + piece.first;
      const PCRE2_SIZE len = piece.second - piece.first;
      PCRE2_SIZE offset = 0, last = 0;
      while (offset < len) {
        int rc = impl_->jit[r] ? pcre2_jit_match(code, subject, len, offset, 0, md, mctx)
                               : pcre2_match(code, subject, len, offset, 0, md, mctx);
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH && impl_->jit[r]) {
          rc = pcre2_match(code, subject, len, offset, PCRE2_NO_JIT, md, mctx);  // JIT stack full
        }
        if (rc < 0) {
          if (rc != PCRE2_ERROR_NOMATCH) {
            Log(LogLevel::kWarn, "pre-tokenizer: regex match failed ({}); keeping the rest whole", rc);
          }
          break;
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const PCRE2_SIZE s = ov[0], e = ov[1];
        if (s > last) next.push_back({piece.first + static_cast<uint32_t>(last), piece.first + static_cast<uint32_t>(s)});
        if (e > s) {
          next.push_back({piece.first + static_cast<uint32_t>(s), piece.first + static_cast<uint32_t>(e)});
          last = e;
          offset = e;
        } else {
          // Empty match: step over one character.
          offset = s + std::min<size_t>(utf8::SymbolLength(static_cast<uint8_t>(subject[s < len ? s : len - 1])), len - s);
          if (offset <= s) offset = s + 1;
        }
      }
      if (last < len) next.push_back({piece.first + static_cast<uint32_t>(last), piece.second});
    }
    out.swap(next);
  }
  if (md) pcre2_match_data_free(md);
  if (mctx) pcre2_match_context_free(mctx);
  if (stack) pcre2_jit_stack_free(stack);
}

}  // namespace ferry
