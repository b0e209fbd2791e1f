// PartialJson: a JSON value parsed as far as the text goes, with byte positions, for
// tool-call parsers that read a model's output while it is still being generated. Every
// node says where it starts, where it ends (when complete) and, for containers, what it
// holds so far. The parse of a prefix of a text is a prefix of the parse of the text: nodes
// complete in the prefix stay complete, with the same extent.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::tool_calls {

struct PartialJson {
  enum class Type { kObject, kArray, kString, kOther };  // kOther: number, true, false, null
  Type type = Type::kOther;
  size_t start = 0;  // the value's first byte
  size_t end = 0;    // one past its last byte, when complete
  bool complete = false;
  // kObject: keys (complete strings, decoded) and their values; kArray: values (keys empty).
  std::vector<std::pair<std::string, std::unique_ptr<PartialJson>>> members;

  const PartialJson* Find(std::string_view key) const;
};

struct PartialParse {
  std::unique_ptr<PartialJson> root;  // null when not even the first byte is a value's
  // The text is not JSON from this byte on (npos: none seen). Nodes before it keep their state.
  size_t invalid_at = std::string::npos;
  size_t stop = 0;  // where parsing stopped: the end of the text, the root's end or invalid_at
};

// Parses one JSON value starting at text[pos] (no leading whitespace skipped). Stops at the
// value's end: what follows is the caller's.
PartialParse ParsePartialJson(std::string_view text, size_t pos);

// The decoded value of a complete JSON string node; false when its escapes are invalid.
bool DecodeJsonString(std::string_view text, const PartialJson& node, std::string& out);

size_t SkipJsonSpace(std::string_view text, size_t pos);

}  // namespace ferry::tool_calls
