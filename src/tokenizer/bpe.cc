// Byte-level BPE ("gpt2"), token for token as llama.cpp's llm_tokenizer_bpe:
//   1. special and added tokens are cut out first (Vocab::Partition);
//   2. each raw fragment is split into words by the family's regexes (PreTokenizer);
//   3. each word's bytes become GPT-2's printable characters (unicode::ByteToChar), one symbol
//      per byte, and adjacent symbols are merged by merge rank (tokenizer.ggml.merges, lowest
//      rank first, the leftmost pair on ties) until no ranked pair is left;
//   4. each final symbol is emitted as its token; a symbol that is no token (a merge result
//      missing from the vocabulary) falls back to the single-byte tokens of its text.
// Families with ignore_merges (llama3) emit a word that is itself a token directly.
//
// Speed: symbols are ids, not strings: every string a merge mentions is interned once (vocab id,
// or an id past the vocabulary for strings that are no token), so a merge lookup is one probe of
// a hash table keyed by the id pair. Text repeats its words, so each Encode call caches the
// tokens of every distinct word it has seen.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "base/log.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace ferry {
namespace {

// (left id, right id) -> (rank, merged id), open addressing.
class MergeTable {
 public:
  struct Entry {
    uint64_t key = ~uint64_t{0};
    int32_t rank = -1;
    int32_t result = -1;
  };
  void Reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    slots_.assign(cap, Entry{});
    mask_ = cap - 1;
  }
  static uint64_t Key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  // Keeps the first rank given for a pair (as llama.cpp's bpe_ranks.emplace).
  void Insert(int32_t a, int32_t b, int32_t rank, int32_t result) {
    const uint64_t k = Key(a, b);
    for (size_t i = Hash(k) & mask_;; i = (i + 1) & mask_) {
      Entry& e = slots_[i];
      if (e.key == k) return;
      if (e.rank < 0) {
        e = Entry{k, rank, result};
        return;
      }
    }
  }
  const Entry* Find(int32_t a, int32_t b) const {
    const uint64_t k = Key(a, b);
    for (size_t i = Hash(k) & mask_;; i = (i + 1) & mask_) {
      const Entry& e = slots_[i];
      if (e.rank < 0) return nullptr;
      if (e.key == k) return &e;
    }
  }

 private:
  static uint64_t Hash(uint64_t k) {
    k ^= k >> 31;
    k *= 0x9E3779B97F4A7C15ull;
    return k ^ (k >> 29);
  }
  std::vector<Entry> slots_;
  size_t mask_ = 0;
};

struct Symbol {
  int32_t id;    // interned id of the symbol's text
  int32_t prev;  // -1: none
  int32_t next;  // -1: none
  uint32_t start, len;  // bytes of the word; len 0 once merged into the left neighbour
};

struct Candidate {
  int32_t rank;
  int32_t left;
  int32_t right;
  int32_t left_id;
  int32_t right_id;
  int32_t result;
};
// Min-heap order: lower rank first, then the leftmost pair.
struct CandidateGreater {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

class BpeTokenizer final : public TokenizerImpl {
 public:
  BpeTokenizer(Vocab vocab, PreTokenizer pre, bool ignore_merges)
      : TokenizerImpl(std::move(vocab), "gpt2"), pre_(std::move(pre)), ignore_merges_(ignore_merges) {}

  Status Init(const std::vector<std::string>& merges) {
    merges_.Reserve(merges.size());
    size_t skipped = 0;
    for (size_t r = 0; r < merges.size(); ++r) {
      const std::string& m = merges[r];
      const size_t sp = m.find(' ', 1);
      if (sp == std::string::npos || sp + 1 >= m.size()) {
        return CorruptFileError("tokenizer.ggml.merges[{}] is not \"left right\": '{}'", r, m);
      }
      const std::string_view left(m.data(), sp), right(m.data() + sp + 1, m.size() - sp - 1);
      const int32_t a = Intern(left), b = Intern(right);
      std::string merged;
      merged.reserve(m.size() - 1);
      merged.append(left).append(right);
      const int32_t c = Intern(merged);
      if (a < 0 || b < 0 || c < 0) {
        ++skipped;
        continue;
      }
      merges_.Insert(a, b, static_cast<int32_t>(r), c);
    }
    if (skipped > 0) Log(LogLevel::kWarn, "tokenizer: {} merges skipped", skipped);
    for (int b = 0; b < 256; ++b) {
      byte_symbol_[static_cast<size_t>(b)] = Intern(unicode::ByteToChar(static_cast<uint8_t>(b)));
    }
    // Pieces: byte-level tokens decode character by character back to bytes.
    pieces_.resize(static_cast<size_t>(vocab_.size()));
    for (int32_t id = 0; id < vocab_.size(); ++id) {
      const std::string& t = vocab_.token(id).text;
      std::string& p = pieces_[static_cast<size_t>(id)];
      for (size_t i = 0; i < t.size();) {
        size_t n = 0;
        const uint32_t cp = unicode::DecodeCodepoint(std::string_view(t).substr(i), &n);
        const int byte = unicode::CharToByte(cp);
        if (byte >= 0) {
          p.push_back(static_cast<char>(byte));
        } else {
          p.append(t, i, n);  // not a byte character: keep it as it is
        }
        i += n;
      }
    }
    return Status::Ok();
  }

  std::vector<int32_t> Encode(std::string_view text, bool add_special,
                              bool parse_special) const override {
    std::vector<int32_t> out;
    out.reserve(text.size() / 4 + 4);
    if (add_special && vocab_.add_bos()) out.push_back(vocab_.bos());
    Workspace ws;
    for (const Fragment& f : vocab_.Partition(text, parse_special)) {
      if (f.is_token()) {
        out.push_back(f.token);
      } else {
        EncodeText(ws, f.text, out);
      }
    }
    if (add_special && vocab_.add_eos()) out.push_back(vocab_.eos());
    return out;
  }

  // The bytes the token's byte-to-unicode text stands for (decoded once at load).
  std::string TextPiece(int32_t id, const TokenData& /*t*/) const override { return pieces_[static_cast<size_t>(id)]; }

 private:
  struct Workspace {
    std::vector<PreTokenizer::Piece> pieces;
    std::vector<Symbol> symbols;
    std::vector<Candidate> heap;
    std::string mapped;
    // word bytes -> [offset, count) in `cached`; keys point into the text being encoded.
    std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>> cache;
    std::vector<int32_t> cached;
  };

  int32_t Intern(std::string_view s) {
    const int32_t id = vocab_.Find(s);
    if (id >= 0) return id;
    auto it = extra_ids_.find(std::string(s));
    if (it != extra_ids_.end()) return it->second;
    const int64_t next = static_cast<int64_t>(vocab_.size()) + static_cast<int64_t>(extra_texts_.size());
    if (next >= INT32_MAX) return -1;
    extra_texts_.emplace_back(s);
    extra_ids_.emplace(std::string(s), static_cast<int32_t>(next));
    return static_cast<int32_t>(next);
  }

  void EncodeText(Workspace& ws, std::string_view text, std::vector<int32_t>& out) const {
    pre_.Split(text, ws.pieces);
    for (const PreTokenizer::Piece& p : ws.pieces) {
      const std::string_view word = text.substr(p.first, p.second - p.first);
      auto it = ws.cache.find(word);
      if (it != ws.cache.end()) {
        out.insert(out.end(), ws.cached.begin() + it->second.first,
                   ws.cached.begin() + it->second.first + it->second.second);
        continue;
      }
      const size_t before = out.size();
      EncodeWord(ws, word, out);
      if (ws.cache.size() < (1u << 20) && word.size() < 256) {
        const auto off = static_cast<uint32_t>(ws.cached.size());
        ws.cached.insert(ws.cached.end(), out.begin() + static_cast<ptrdiff_t>(before), out.end());
        ws.cache.emplace(word, std::make_pair(off, static_cast<uint32_t>(out.size() - before)));
      }
    }
  }

  void TryAdd(Workspace& ws, int32_t left, int32_t right) const {
    if (left < 0 || right < 0) return;
    const Symbol& l = ws.symbols[static_cast<size_t>(left)];
    const Symbol& r = ws.symbols[static_cast<size_t>(right)];
    const MergeTable::Entry* e = merges_.Find(l.id, r.id);
    if (!e) return;
    ws.heap.push_back({e->rank, left, right, l.id, r.id, e->result});
    std::push_heap(ws.heap.begin(), ws.heap.end(), CandidateGreater());
  }

  void EncodeWord(Workspace& ws, std::string_view word, std::vector<int32_t>& out) const {
    if (ignore_merges_) {
      ws.mapped.clear();
      for (char c : word) ws.mapped.append(unicode::ByteToChar(static_cast<uint8_t>(c)));
      const int32_t id = vocab_.Find(ws.mapped);
      if (id >= 0) {
        out.push_back(id);
        return;
      }
    }
    ws.symbols.clear();
    ws.heap.clear();
    const auto n = static_cast<int32_t>(word.size());
    for (int32_t i = 0; i < n; ++i) {
      ws.symbols.push_back({byte_symbol_[static_cast<uint8_t>(word[static_cast<size_t>(i)])], i - 1,
                            i + 1 < n ? i + 1 : -1, static_cast<uint32_t>(i), 1});
    }
    for (int32_t i = 1; i < n; ++i) TryAdd(ws, i - 1, i);
    while (!ws.heap.empty()) {
      std::pop_heap(ws.heap.begin(), ws.heap.end(), CandidateGreater());
      const Candidate c = ws.heap.back();
      ws.heap.pop_back();
      Symbol& l = ws.symbols[static_cast<size_t>(c.left)];
      Symbol& r = ws.symbols[static_cast<size_t>(c.right)];
      if (l.len == 0 || r.len == 0 || l.id != c.left_id || r.id != c.right_id || l.next != c.right) {
        continue;  // stale
      }
      l.id = c.result;
      l.len += r.len;
      r.len = 0;
      l.next = r.next;
      if (r.next >= 0) ws.symbols[static_cast<size_t>(r.next)].prev = c.left;
      TryAdd(ws, l.prev, c.left);
      TryAdd(ws, c.left, l.next);
    }
    for (int32_t i = n > 0 ? 0 : -1; i != -1; i = ws.symbols[static_cast<size_t>(i)].next) {
      const Symbol& s = ws.symbols[static_cast<size_t>(i)];
      if (s.id >= 0 && s.id < vocab_.size()) {
        out.push_back(s.id);
        continue;
      }
      // Not a token: llama.cpp emits the single-byte tokens of the symbol's (mapped) text.
      std::string mapped;
      for (uint32_t k = s.start; k < s.start + s.len; ++k) {
        mapped.append(unicode::ByteToChar(static_cast<uint8_t>(word[k])));
      }
      for (char ch : mapped) {
        const int32_t id = vocab_.Find(std::string_view(&ch, 1));
        if (id >= 0) out.push_back(id);
      }
    }
  }

  PreTokenizer pre_;
  bool ignore_merges_;
  MergeTable merges_;
  std::unordered_map<std::string, int32_t> extra_ids_;
  std::vector<std::string> extra_texts_;
  std::array<int32_t, 256> byte_symbol_{};
  std::vector<std::string> pieces_;
};

}  // namespace

StatusOr<std::unique_ptr<TokenizerImpl>> CreateBpeTokenizer(const Metadata& md) {
  const std::string pre = md.GetString("tokenizer.ggml.pre").value_or("default");
  FERRY_ASSIGN_OR_RETURN(PreTokenizer pt, PreTokenizer::ForType(pre));
  VocabDefaults d;
  d.bos = 11;  // llama.cpp's defaults for "gpt2" when the file names none
  d.eos = 11;
  d.add_bos = PreTokenizer::AddsBos(pre);
  FERRY_ASSIGN_OR_RETURN(Vocab vocab, Vocab::FromMetadata(md, d));
  std::vector<std::string> merges;
  if (md.Has("tokenizer.ggml.merges")) {
    auto m = md.GetStringArray("tokenizer.ggml.merges");
    if (!m) return CorruptFileError("tokenizer.ggml.merges is not an array of strings");
    merges = std::move(*m);
  } else {
    return NotFoundError("tokenizer.ggml.merges is missing: a 'gpt2' tokenizer needs its merges");
  }
  const bool ignore_merges =
      md.GetBool("tokenizer.ggml.ignore_merges").value_or(PreTokenizer::IgnoresMerges(pre));
  auto impl = std::make_unique<BpeTokenizer>(std::move(vocab), std::move(pt), ignore_merges);
  FERRY_RETURN_IF_ERROR(impl->Init(merges));
  return std::unique_ptr<TokenizerImpl>(std::move(impl));
}

}  // namespace ferry
