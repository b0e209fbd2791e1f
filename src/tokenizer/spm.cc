// SentencePiece-style BPE ("llama"), token for token as llama.cpp's llm_tokenizer_spm:
//   1. special tokens are cut out first (Vocab::Partition);
//   2. each raw fragment gets a ' ' prefix when it is first or follows a special token (and
//      add_space_prefix is set), then every ' ' becomes U+2581;
//   3. the fragment is split into UTF-8 symbols (llama.cpp's byte-length rule) and adjacent
//      symbols are merged greedily: always the pair whose concatenation is the vocab token with
//      the highest score, the leftmost pair on ties;
//   4. a final symbol that is a token is emitted; otherwise each of its bytes is emitted as its
//      <0xXX> byte token (or the one-character token, or unk).
// llama.cpp also keeps a reverse-merge map for step 4, but it only ever holds texts that are
// vocab tokens while step 4 consults it only for texts that are not, so it is omitted here.
//
// Speed: llama.cpp runs step 3 over the whole fragment with one priority queue; for a megabyte
// of text that queue no longer fits in cache and dominates the time. Here the fragment is first
// cut into independent chunks: a merged symbol spanning the boundary between initial symbols x|y
// would contain the bytes xy, and every merged symbol is a vocab token split into the very same
// initial symbols, so if no vocab token has the adjacent symbol pair (x, y) no merge can ever
// span that boundary. Merges on either side never interact (the queue order restricted to one
// chunk is the same), so encoding chunk by chunk gives exactly llama.cpp's tokens.
#include <algorithm>
#include <array>
#include <cstring>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace ferry {

namespace {

struct Symbol {
  int32_t prev;
  int32_t next;
  size_t start;  // byte offset into the chunk
  size_t n;      // bytes; 0 once merged into its left neighbour
  int32_t id;    // token id once merged (a merge result is always a token); -1 before
};

struct Bigram {
  int32_t left;
  int32_t right;
  float score;
  int32_t id;  // the token left+right makes
  size_t size;
};

// Max-heap order: higher score first, then the smaller left index.
struct BigramLess {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.score < r.score || (l.score == r.score && l.left > r.left);
  }
};

// Two adjacent initial symbols (at most 4 + 4 bytes), packed for hashing.
struct SymbolPair {
  uint64_t bytes;
  uint32_t len;
  bool operator==(const SymbolPair& o) const { return bytes == o.bytes && len == o.len; }
};
inline SymbolPair PackPair(const char* data, size_t len) {
  SymbolPair p{0, static_cast<uint32_t>(len)};
  std::memcpy(&p.bytes, data, len);  // len <= 8
  return p;
}
inline uint64_t HashPair(const SymbolPair& p) {
  uint64_t h = (p.bytes ^ (uint64_t{p.len} << 59)) * 0x9E3779B97F4A7C15ull;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 32);
}

// Open-addressing set of symbol pairs (built once, probed once per input character).
class PairSet {
 public:
  void Build(const std::vector<SymbolPair>& pairs) {
    size_t cap = 16;
    while (cap < 2 * pairs.size()) cap *= 2;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
    for (const SymbolPair& p : pairs) {
      if (Contains(p)) continue;
      size_t i = HashPair(p) & mask_;
      while (slots_[i].used) i = (i + 1) & mask_;
      slots_[i] = Slot{p, true};
    }
  }
  bool Contains(const SymbolPair& p) const {
    for (size_t i = HashPair(p) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (!s.used) return false;
      if (s.pair == p) return true;
    }
  }

 private:
  struct Slot {
    SymbolPair pair{0, 0};
    bool used = false;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

class SpmTokenizer final : public TokenizerImpl {
 public:
  explicit SpmTokenizer(Vocab vocab) : TokenizerImpl(std::move(vocab), "llama") {
    scores_.resize(static_cast<size_t>(vocab_.size()));
    for (int32_t id = 0; id < vocab_.size(); ++id) scores_[static_cast<size_t>(id)] = vocab_.token(id).score;
    // Every adjacent pair of initial symbols inside a vocab token (see the top of the file).
    std::vector<SymbolPair> pairs;
    for (int32_t id = 0; id < vocab_.size(); ++id) {
      const std::string& t = vocab_.token(id).text;
      size_t prev = 0, prev_n = 0;
      for (size_t offs = 0; offs < t.size();) {
        const size_t n = std::min(utf8::SymbolLength(static_cast<uint8_t>(t[offs])), t.size() - offs);
        if (prev_n > 0) pairs.push_back(PackPair(t.data() + prev, prev_n + n));
        prev = offs;
        prev_n = n;
        offs += n;
      }
    }
    inner_pairs_.Build(pairs);
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
      const char name[6] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
      int32_t id = vocab_.Find(std::string_view(name, 6));
      if (id < 0) id = vocab_.Find(std::string_view(reinterpret_cast<const char*>(&b), 1));
      if (id < 0) id = vocab_.unk();
      byte_token_[static_cast<size_t>(b)] = id;
    }
    // Byte tokens render as their byte; parse "<0xXX>" once.
    token_byte_.assign(static_cast<size_t>(vocab_.size()), -1);
    for (int32_t id = 0; id < vocab_.size(); ++id) {
      const TokenData& t = vocab_.token(id);
      if (t.type != TokenType::kByte) continue;
      const std::string& s = t.text;
      auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        return -1;
      };
      if (s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>' && hex(s[3]) >= 0 &&
          hex(s[4]) >= 0) {
        token_byte_[static_cast<size_t>(id)] = static_cast<int16_t>(hex(s[3]) * 16 + hex(s[4]));
      }
    }
  }

  std::vector<int32_t> Encode(std::string_view text, bool add_special,
                              bool parse_special) const override {
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 4);
    const bool add_bos = add_special && vocab_.add_bos();
    if (add_bos) out.push_back(vocab_.bos());
    Workspace ws;
    bool prev_special = true;  // a space prefix goes on the first fragment
    for (const Fragment& f : vocab_.Partition(text, parse_special)) {
      if (f.is_token()) {
        out.push_back(f.token);
        prev_special = true;
        continue;
      }
      ws.escaped.clear();
      if (vocab_.add_space_prefix() && prev_special) ws.escaped.append(utf8::kSpaceMarker);
      for (char c : f.text) {
        if (c == ' ') {
          ws.escaped.append(utf8::kSpaceMarker);
        } else {
          ws.escaped.push_back(c);
        }
      }
      EncodeChunks(ws, out);
      prev_special = false;
    }
    if (add_special && vocab_.add_eos()) out.push_back(vocab_.eos());
    return out;
  }

  std::string TextPiece(int32_t id, const TokenData& t) const override {
    if (t.type == TokenType::kByte) {
      int16_t b = token_byte_[static_cast<size_t>(id)];
      if (b >= 0) return std::string(1, static_cast<char>(b));
      // a malformed byte token shows its text
    }
    return utf8::UnescapeSpaces(t.text);
  }

 private:
  struct Workspace {
    std::string escaped;
    std::vector<Symbol> symbols;
    std::vector<Bigram> heap;
  };

  void TryAddBigram(Workspace& ws, std::string_view text, int32_t left, int32_t right) const {
    if (left < 0 || right < 0) return;
    const Symbol& l = ws.symbols[static_cast<size_t>(left)];
    const Symbol& r = ws.symbols[static_cast<size_t>(right)];
    const size_t size = l.n + r.n;
    const int32_t id = vocab_.Find(text.substr(l.start, size));
    if (id < 0) return;
    ws.heap.push_back({left, right, scores_[static_cast<size_t>(id)], id, size});
    std::push_heap(ws.heap.begin(), ws.heap.end(), BigramLess());
  }

  // Cuts ws.escaped where no merge can span and encodes each chunk.
  void EncodeChunks(Workspace& ws, std::vector<int32_t>& out) const {
    const std::string_view text = ws.escaped;
    size_t chunk_start = 0, prev = 0, prev_n = 0;
    for (size_t offs = 0; offs < text.size();) {
      const size_t n = std::min(utf8::SymbolLength(static_cast<uint8_t>(text[offs])), text.size() - offs);
      if (prev_n > 0 && !inner_pairs_.Contains(PackPair(text.data() + prev, prev_n + n))) {
        EncodeChunk(ws, text.substr(chunk_start, offs - chunk_start), out);
        chunk_start = offs;
      }
      prev = offs;
      prev_n = n;
      offs += n;
    }
    EncodeChunk(ws, text.substr(chunk_start), out);
  }

  void EncodeChunk(Workspace& ws, std::string_view text, std::vector<int32_t>& out) const {
    ws.symbols.clear();
    ws.heap.clear();
    for (size_t offs = 0; offs < text.size();) {
      size_t n = std::min(utf8::SymbolLength(static_cast<uint8_t>(text[offs])), text.size() - offs);
      const int32_t index = static_cast<int32_t>(ws.symbols.size());
      offs += n;
      ws.symbols.push_back({index - 1, offs == text.size() ? -1 : index + 1, offs - n, n, -1});
    }
    for (size_t i = 1; i < ws.symbols.size(); ++i) {
      TryAddBigram(ws, text, static_cast<int32_t>(i - 1), static_cast<int32_t>(i));
    }
    while (!ws.heap.empty()) {
      std::pop_heap(ws.heap.begin(), ws.heap.end(), BigramLess());
      const Bigram b = ws.heap.back();
      ws.heap.pop_back();
      Symbol& l = ws.symbols[static_cast<size_t>(b.left)];
      Symbol& r = ws.symbols[static_cast<size_t>(b.right)];
      if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // stale
      l.n += r.n;
      l.id = b.id;
      r.n = 0;
      l.next = r.next;
      if (r.next >= 0) ws.symbols[static_cast<size_t>(r.next)].prev = b.left;
      TryAddBigram(ws, text, l.prev, b.left);
      TryAddBigram(ws, text, b.left, l.next);
    }
    for (int32_t i = ws.symbols.empty() ? -1 : 0; i != -1; i = ws.symbols[static_cast<size_t>(i)].next) {
      const Symbol& s = ws.symbols[static_cast<size_t>(i)];
      const std::string_view piece = text.substr(s.start, s.n);
      const int32_t id = s.id >= 0 ? s.id : vocab_.Find(piece);
      if (id >= 0) {
        out.push_back(id);
        continue;
      }
      for (char c : piece) {
        const int32_t bid = byte_token_[static_cast<uint8_t>(c)];
        if (bid >= 0) out.push_back(bid);
      }
    }
  }

  PairSet inner_pairs_;
  std::vector<float> scores_;  // dense copy of the token scores: the merge loop reads them a lot
  std::array<int32_t, 256> byte_token_{};
  std::vector<int16_t> token_byte_;
};

}  // namespace

StatusOr<std::unique_ptr<TokenizerImpl>> CreateSpmTokenizer(const Metadata& md) {
  VocabDefaults d;
  d.bos = 1;
  d.eos = 2;
  d.unk = 0;
  d.add_bos = true;
  d.add_eos = false;
  d.add_space_prefix = true;
  FERRY_ASSIGN_OR_RETURN(Vocab vocab, Vocab::FromMetadata(md, d));
  return std::unique_ptr<TokenizerImpl>(new SpmTokenizer(std::move(vocab)));
}

}  // namespace ferry
