#include "constraint/token_trie.h"

#include <algorithm>

namespace ferry::constraint {

TokenTrie::TokenTrie(std::vector<std::pair<std::string, int32_t>> entries) {
  std::erase_if(entries, [](const auto& e) { return e.first.empty(); });
  std::sort(entries.begin(), entries.end());
  // path[d] = the node at depth d+1 on the current path; its string is a prefix of the next entry.
  std::vector<int32_t> path;
  std::string prev;
  for (const auto& [bytes, id] : entries) {
    size_t common = 0;
    while (common < prev.size() && common < bytes.size() && prev[common] == bytes[common] &&
           common < path.size())
      ++common;
    for (size_t d = common; d < path.size(); ++d)
      nodes_[static_cast<size_t>(path[d])].end = static_cast<int32_t>(nodes_.size());
    path.resize(common);
    for (size_t d = common; d < bytes.size(); ++d) {
      path.push_back(static_cast<int32_t>(nodes_.size()));
      nodes_.push_back({static_cast<uint8_t>(bytes[d]), static_cast<int32_t>(d + 1), -1,
                        static_cast<int32_t>(ids_.size())});
    }
    ids_.push_back(id);
    max_depth_ = std::max(max_depth_, static_cast<int32_t>(bytes.size()));
    prev = bytes;
  }
  for (int32_t n : path) nodes_[static_cast<size_t>(n)].end = static_cast<int32_t>(nodes_.size());
}

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> end_tokens,
                                 std::vector<std::string> special_texts)
    : bytes_(std::move(token_bytes)),
      end_tokens_(std::move(end_tokens)),
      is_end_(bytes_.size(), false),
      producible_(bytes_.size(), false) {
  special_texts.resize(bytes_.size());
  for (size_t i = 0; i < bytes_.size(); ++i) {
    const int32_t id = static_cast<int32_t>(i);
    if (bytes_[i].empty() && !special_texts[i].empty()) {
      special_ids_[special_texts[i]] = id;
      specials_.push_back({special_texts[i], id});
    }
    producible_[i] = !bytes_[i].empty() || !special_texts[i].empty();
  }
  std::vector<std::pair<std::string, int32_t>> entries;
  entries.reserve(bytes_.size());
  for (size_t i = 0; i < bytes_.size(); ++i) entries.push_back({bytes_[i], static_cast<int32_t>(i)});
  std::erase_if(end_tokens_, [&](int32_t t) { return t < 0 || t >= size(); });
  for (int32_t t : end_tokens_) {
    is_end_[static_cast<size_t>(t)] = true;
    producible_[static_cast<size_t>(t)] = false;
    entries[static_cast<size_t>(t)].first.clear();  // an end token is never grammar text
  }
  trie_ = TokenTrie(std::move(entries));
  std::erase_if(specials_, [&](const auto& s) { return is_end_[static_cast<size_t>(s.second)]; });
}

int32_t TokenVocabulary::FindToken(const std::string& text) const {
  // A special token wins over a text token of its text. Text tokens are scanned: this runs
  // once per named token terminal when a grammar is bound, not worth a map of the vocabulary.
  if (auto it = special_ids_.find(text); it != special_ids_.end()) return it->second;
  auto it = std::find(bytes_.begin(), bytes_.end(), text);
  return it == bytes_.end() ? -1 : static_cast<int32_t>(it - bytes_.begin());
}

bool TokenVocabulary::IsProducible(int32_t id) const {
  return id >= 0 && id < size() && producible_[static_cast<size_t>(id)];
}

bool TokenVocabulary::IsEnd(int32_t id) const {
  return id >= 0 && id < size() && is_end_[static_cast<size_t>(id)];
}

}  // namespace ferry::constraint
