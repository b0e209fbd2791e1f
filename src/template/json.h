// JSON bridge: nlohmann::ordered_json <-> Value, and Python's json.dumps for `tojson`.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "template/value.h"

namespace ferry::tmpl {

Value FromJson(const nlohmann::ordered_json& j);

struct DumpOptions {
  bool ensure_ascii = false;   // transformers passes False
  bool sort_keys = false;
  bool has_indent = false;     // indent=None vs an int/string
  std::string indent;          // the indent unit when has_indent
  std::string item_sep = ", "; // Python picks "," when indent is set
  std::string key_sep = ": ";
};

// json.dumps(value, ...) byte for byte; raises TypeError for undefined/callables.
std::string DumpJson(const Value& v, const DumpOptions& options);

}  // namespace ferry::tmpl
