// TokenTrie: byte strings (token bytes, or suffixes of them) in a trie laid out in preorder,
// so a walk is one loop over nodes that skips a dead subtree by jumping to its end, and the
// ids below a node are one contiguous range.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ferry::constraint {

class TokenTrie {
 public:
  TokenTrie() = default;
  // entries: (bytes, id); empty byte strings are left out.
  explicit TokenTrie(std::vector<std::pair<std::string, int32_t>> entries);

  struct Node {
    uint8_t byte;
    int32_t depth;      // 1 for the root's children
    int32_t end;        // one past the last node of this subtree
    int32_t ids_begin;  // ids ending at this node: ids()[ids_begin, next node's ids_begin)
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  // Ids in preorder of the node where they end; ids of a subtree [i, end) are
  // ids_[nodes_[i].ids_begin, IdsEnd(end)).
  const std::vector<int32_t>& ids() const { return ids_; }
  int32_t IdsBegin(int32_t node) const {
    return node < static_cast<int32_t>(nodes_.size()) ? nodes_[static_cast<size_t>(node)].ids_begin
                                                      : static_cast<int32_t>(ids_.size());
  }
  bool empty() const { return nodes_.empty(); }
  int32_t max_depth() const { return max_depth_; }

 private:
  std::vector<Node> nodes_;
  std::vector<int32_t> ids_;
  int32_t max_depth_ = 0;
};

// The model's vocabulary as a constraint sees it: the bytes each token adds to the output.
// Tokens with no bytes (control/special tokens) are allowed only by a token terminal that
// names them (GBNF <[id]> or <text>; special_texts holds the text they go by, e.g.
// "[TOOL_CALLS]"); the end tokens are allowed exactly where the grammar may end.
class TokenVocabulary {
 public:
  // special_texts: [size] or empty; the text of each byte-less token ("" for none).
  TokenVocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> end_tokens,
                  std::vector<std::string> special_texts = {});
  int32_t size() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }
  const std::vector<int32_t>& end_tokens() const { return end_tokens_; }
  bool IsEnd(int32_t id) const;
  const TokenTrie& trie() const { return trie_; }
  // The token whose text is exactly `text` (a special token's before a text token's); -1.
  int32_t FindToken(const std::string& text) const;
  // A token a negated token terminal may stand for: it has bytes or a special text and does
  // not end the output.
  bool IsProducible(int32_t id) const;
  // The special tokens (byte-less, with a text) that are not end tokens: (text, id).
  const std::vector<std::pair<std::string, int32_t>>& specials() const { return specials_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> end_tokens_;
  std::vector<bool> is_end_;
  std::vector<bool> producible_;
  std::vector<std::pair<std::string, int32_t>> specials_;
  std::unordered_map<std::string, int32_t> special_ids_;  // specials by text
  TokenTrie trie_;
};

}  // namespace ferry::constraint
