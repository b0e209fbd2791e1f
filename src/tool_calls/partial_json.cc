#include "tool_calls/partial_json.h"

#include <nlohmann/json.hpp>

namespace ferry::tool_calls {
namespace {

// Deeper input is treated as invalid: a fuzzer's "[[[[..." must not exhaust the stack.
constexpr int kMaxDepth = 256;

class Parser {
 public:
  explicit Parser(std::string_view text) : t_(text) {}

  std::unique_ptr<PartialJson> Value(size_t& pos, int depth) {
    if (pos >= t_.size()) return nullptr;
    auto node = std::make_unique<PartialJson>();
    node->start = pos;
    const char c = t_[pos];
    if (depth > kMaxDepth) return Invalid(pos), nullptr;
    if (c == '{' || c == '[') {
      node->type = c == '{' ? PartialJson::Type::kObject : PartialJson::Type::kArray;
      Container(*node, pos, depth);
    } else if (c == '"') {
      node->type = PartialJson::Type::kString;
      String(*node, pos);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      Number(*node, pos);
    } else if (c == 't' || c == 'f' || c == 'n') {
      Literal(*node, pos);
    } else {
      Invalid(pos);
      return nullptr;
    }
    return node;
  }
  size_t invalid_at = std::string::npos;

 private:
  void Invalid(size_t pos) {
    if (invalid_at == std::string::npos) invalid_at = pos;
  }
  bool Stopped() const { return invalid_at != std::string::npos; }

  void Container(PartialJson& node, size_t& pos, int depth) {
    const bool object = node.type == PartialJson::Type::kObject;
    const char close = object ? '}' : ']';
    ++pos;
    pos = SkipJsonSpace(t_, pos);
    if (pos < t_.size() && t_[pos] == close) return Close(node, pos);
    while (pos < t_.size()) {
      std::string key;
      if (object) {
        if (t_[pos] != '"') return Invalid(pos);
        PartialJson k;
        k.start = pos;
        String(k, pos);
        if (!k.complete) return;  // at the end of the text, or invalid
        // Undecodable (a lone surrogate, invalid UTF-8): invalid at its closing quote, the byte
        // that showed it, so that what a prefix parsed stays parsed.
        if (!DecodeJsonString(t_, k, key)) return Invalid(k.end - 1);
        pos = SkipJsonSpace(t_, pos);
        if (pos >= t_.size()) return;
        if (t_[pos] != ':') return Invalid(pos);
        pos = SkipJsonSpace(t_, pos + 1);
        if (pos >= t_.size()) return;
      }
      std::unique_ptr<PartialJson> v = Value(pos, depth + 1);
      if (!v) return;
      const bool done = v->complete;
      node.members.emplace_back(std::move(key), std::move(v));
      if (!done) return;
      pos = SkipJsonSpace(t_, pos);
      if (pos >= t_.size()) return;
      if (t_[pos] == close) return Close(node, pos);
      if (t_[pos] != ',') return Invalid(pos);
      pos = SkipJsonSpace(t_, pos + 1);
      if (pos < t_.size() && t_[pos] == close) return Invalid(pos);  // a trailing comma
    }
  }
  void Close(PartialJson& node, size_t& pos) {
    node.end = ++pos;
    node.complete = true;
  }

  void String(PartialJson& node, size_t& pos) {
    node.type = PartialJson::Type::kString;
    for (size_t i = pos + 1; i < t_.size(); ++i) {
      const unsigned char c = static_cast<unsigned char>(t_[i]);
      if (c == '"') {
        pos = i;
        return Close(node, pos);
      }
      if (c < 0x20) {
        pos = i;
        return Invalid(i);
      }
      if (c != '\\') continue;
      if (i + 1 >= t_.size()) break;
      const char e = t_[i + 1];
      if (e == 'u') {
        for (size_t h = i + 2; h < i + 6; ++h) {
          if (h >= t_.size()) {
            pos = t_.size();
            return;
          }
          if (!std::isxdigit(static_cast<unsigned char>(t_[h]))) {
            pos = h;
            return Invalid(h);
          }
        }
        i += 5;
      } else if (std::string_view("\"\\/bfnrt").find(e) != std::string_view::npos) {
        ++i;
      } else {
        pos = i + 1;
        return Invalid(i + 1);
      }
    }
    pos = t_.size();
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, complete once a byte past it is seen.
  void Number(PartialJson& node, size_t& pos) {
    const size_t n = t_.size();
    size_t i = pos;
    auto digit = [&](size_t k) { return k < n && t_[k] >= '0' && t_[k] <= '9'; };
    // Digits from i (at least one unless the text ends first); false on a byte that is not one.
    auto run = [&]() {
      const size_t from = i;
      while (digit(i)) ++i;
      return i > from || i >= n;
    };
    if (t_[i] == '-') ++i;
    if (i < n && t_[i] == '0') {
      ++i;
    } else if (!run()) {
      pos = i;
      return Invalid(i);
    }
    if (i < n && t_[i] == '.' && (++i, !run())) return pos = i, Invalid(i);
    if (i < n && (t_[i] == 'e' || t_[i] == 'E')) {
      ++i;
      if (i < n && (t_[i] == '+' || t_[i] == '-')) ++i;
      if (!run()) return pos = i, Invalid(i);
    }
    pos = i;
    if (i >= n) return;  // more digits may follow
    node.end = i;
    node.complete = true;
  }

  void Literal(PartialJson& node, size_t& pos) {
    const std::string_view word = t_[pos] == 't' ? "true" : t_[pos] == 'f' ? "false" : "null";
    size_t i = 0;
    while (i < word.size() && pos + i < t_.size() && t_[pos + i] == word[i]) ++i;
    if (i == word.size()) {
      pos += i;
      node.end = pos;
      node.complete = true;
    } else if (pos + i >= t_.size()) {
      pos = t_.size();
    } else {
      pos += i;
      Invalid(pos);
    }
  }

  std::string_view t_;
};

}  // namespace

const PartialJson* PartialJson::Find(std::string_view key) const {
  if (type != Type::kObject) return nullptr;
  for (const auto& [k, v] : members)
    if (k == key) return v.get();
  return nullptr;
}

size_t SkipJsonSpace(std::string_view text, size_t pos) {
  while (pos < text.size() &&
         (text[pos] == ' ' || text[pos] == '\n' || text[pos] == '\t' || text[pos] == '\r'))
    ++pos;
  return pos;
}

PartialParse ParsePartialJson(std::string_view text, size_t pos) {
  Parser p(text);
  PartialParse out;
  out.root = p.Value(pos, 0);
  out.invalid_at = p.invalid_at;
  out.stop = out.invalid_at != std::string::npos ? out.invalid_at
             : out.root && out.root->complete    ? out.root->end
                                                 : text.size();
  return out;
}

bool DecodeJsonString(std::string_view text, const PartialJson& node, std::string& out) {
  if (!node.complete || node.type != PartialJson::Type::kString) return false;
  nlohmann::json j = nlohmann::json::parse(text.substr(node.start, node.end - node.start), nullptr,
                                           /*allow_exceptions=*/false);
  if (!j.is_string()) return false;
  out = j.get<std::string>();
  return true;
}

}  // namespace ferry::tool_calls
