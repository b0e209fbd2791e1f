#include "tool_calls/tool_grammar.h"

#include <fmt/format.h>

namespace ferry::tool_calls {
namespace {

// A GBNF string literal for raw bytes.
std::string Lit(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// A JSON string's text for a name ("get_weather" with its quotes, escaped as JSON).
std::string JsonName(const std::string& name) {
  return nlohmann::json(name).dump();
}

}  // namespace

std::string ToolCallGbnf(ToolFormat format, const std::vector<ToolDef>& tools, bool parallel,
                         bool after_opener) {
  // call ::= the alternatives, one per tool, each in the family's object form.
  const char* args_key = format == ToolFormat::kLlama3 ? "parameters" : "arguments";
  std::string call = "call ::= ";
  for (size_t i = 0; i < tools.size(); ++i) {
    if (i) call += " | ";
    if (format == ToolFormat::kMistralV11)
      call += Lit(tools[i].name + "[ARGS]") + fmt::format(" schema-{}", i);
    else
      call += Lit(fmt::format("{{\"name\": {}, \"{}\": ", JsonName(tools[i].name), args_key)) +
              fmt::format(" schema-{} ", i) + Lit("}");
  }
  call += "\n";
  std::string root;
  switch (format) {
    case ToolFormat::kHermes:
      // <tool_call>\n{...}\n</tool_call>, as the Hermes and Qwen templates write calls.
      root = fmt::format(
          "root ::= {} call {}{}\n", Lit(after_opener ? "\n" : "<tool_call>\n"), Lit("\n</tool_call>"),
          parallel ? " (" + Lit("\n<tool_call>\n") + " call " + Lit("\n</tool_call>") + ")*" : "");
      break;
    case ToolFormat::kLlama3:
      root = fmt::format("root ::= call{}\n", parallel ? " (" + Lit("; ") + " call)*" : "");
      break;
    case ToolFormat::kMistralV3:
      root = fmt::format("root ::= {} call{} {}\n", Lit(after_opener ? "[" : "[TOOL_CALLS]["),
                         parallel ? " (" + Lit(", ") + " call)*" : "", Lit("]"));
      break;
    case ToolFormat::kMistralV11:
      root = fmt::format("root ::= {}call{}\n", after_opener ? "" : Lit("[TOOL_CALLS]") + " ",
                         parallel ? " (" + Lit("[TOOL_CALLS]") + " call)*" : "");
      break;
    case ToolFormat::kGeneric:
      root = fmt::format("root ::= {} call{} {}\n", Lit("{\"tool_calls\": ["),
                         parallel ? " (" + Lit(", ") + " call)*" : "", Lit("]}"));
      break;
  }
  return root + call;
}

constraint::ConstraintSpec ToolCallGrammar(ToolFormat format, const std::vector<ToolDef>& tools,
                                           bool parallel, bool after_opener) {
  constraint::ConstraintSpec spec;
  spec.kind = constraint::ConstraintSpec::Kind::kGbnf;
  spec.text = ToolCallGbnf(format, tools, parallel, after_opener);
  for (const ToolDef& t : tools)
    spec.schemas.push_back(t.parameters.is_null() ? std::string(R"({"type": "object", "properties": {}})")
                                                  : t.parameters.dump());
  return spec;
}

}  // namespace ferry::tool_calls
