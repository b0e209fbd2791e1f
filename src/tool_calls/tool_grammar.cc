#include "tool_calls/tool_grammar.h"

#include <fmt/format.h>

#include <algorithm>

namespace ferry::tool_calls {
namespace {

// A GBNF string literal for raw bytes.
std::string RawLit(std::string_view s) {
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

// GBNF for text that may contain the model's special tokens ([TOOL_CALLS], <|channel|>, ...):
// each becomes a token terminal <[id]>, so a forced call emits the token the model was
// trained on, not its text spelled out of ordinary tokens. vocab null: all text.
std::string MarkedLit(std::string_view s, const constraint::TokenVocabulary* vocab) {
  if (vocab == nullptr || vocab->specials().empty()) return RawLit(s);
  std::string out;
  size_t text_start = 0;
  auto flush = [&](size_t end) {
    if (end <= text_start) return;
    if (!out.empty()) out += ' ';
    out += RawLit(s.substr(text_start, end - text_start));
  };
  for (size_t i = 0; i < s.size();) {
    size_t best_len = 0;
    int32_t best_id = -1;
    for (const auto& [text, id] : vocab->specials())
      if (text.size() > best_len && s.substr(i, text.size()) == text) {
        best_len = text.size();
        best_id = id;
      }
    if (best_len == 0) {
      ++i;
      continue;
    }
    flush(i);
    if (!out.empty()) out += ' ';
    out += fmt::format("<[{}]>", best_id);
    i += best_len;
    text_start = i;
  }
  flush(s.size());
  return out.empty() ? RawLit("") : out;
}

// A JSON string's text for a name ("get_weather" with its quotes, escaped as JSON).
std::string JsonName(const std::string& name) {
  return nlohmann::json(name).dump();
}

struct Gbnf {
  std::string text;
  std::vector<std::string> schemas;  // schema-<i>: each tool's parameters, then any others the text uses
};

// Writes one family's call grammar; literals name the vocabulary's special tokens as tokens.
class CallGrammarWriter {
 public:
  explicit CallGrammarWriter(const constraint::TokenVocabulary* vocab) : vocab_(vocab) {}

  // A Qwen3-Coder or DSML call's parameters in the template's XML: each property in schema
  // order, the required ones always, a plain string bare (any text without '<'), other values
  // as JSON valid against the property's schema (appended to `schemas`, referenced by index).
  std::string XmlParameters(ToolFormat format, const nlohmann::ordered_json& params,
                            std::vector<std::string>& schemas) const {
    if (!params.is_object() || !params.contains("properties") || !params["properties"].is_object()) return "";
    std::vector<std::string> required;
    if (params.contains("required") && params["required"].is_array())
      for (const auto& r : params["required"])
        if (r.is_string()) required.push_back(r.get<std::string>());
    std::string out;
    for (const auto& [key, prop] : params["properties"].items()) {
      std::string value;
      const bool bare = prop.is_object() && prop.size() <= 2 && prop.value("type", "") == "string" &&
                        (prop.size() == 1 || prop.contains("description"));
      if (bare) {
        value = "[^<]*";
      } else {
        value = fmt::format("schema-{}", schemas.size());
        schemas.push_back(prop.dump());
      }
      const std::string item =
          format == ToolFormat::kDeepSeekV32
              ? fmt::format("{} {} {}",
                            Lit(fmt::format("<｜DSML｜parameter name=\"{}\" string=\"{}\">", key, bare)),
                            value, Lit("</｜DSML｜parameter>\n"))
              : fmt::format("{} {} {}", Lit("<parameter=" + key + ">\n"), value, Lit("\n</parameter>\n"));
      const bool req = std::find(required.begin(), required.end(), key) != required.end();
      out += req ? " " + item : " (" + item + ")?";
    }
    return out;
  }

  // One alternative of `call ::=` per tool, in the family's form.
  std::string CallAlternative(ToolFormat format, const ToolDef& tool, size_t i, Gbnf& g) const {
    const std::string schema = fmt::format(" schema-{} ", i);
    switch (format) {
      case ToolFormat::kMistralV11:
        return Lit(tool.name + "[ARGS]") + schema;
      case ToolFormat::kQwen3Coder:
        return Lit("<function=" + tool.name + ">\n") + XmlParameters(format, tool.parameters, g.schemas) +
               " " + Lit("</function>");
      case ToolFormat::kDeepSeekV32:
        return Lit("<｜DSML｜invoke name=\"" + tool.name + "\">\n") +
               XmlParameters(format, tool.parameters, g.schemas) + " " + Lit("</｜DSML｜invoke>\n");
      case ToolFormat::kHarmony:
        // The recipient after the channel (as models write it) or before (as the template renders it).
        return fmt::format(
            "({} | {}){}",
            Lit("<|channel|>commentary to=functions." + tool.name + " <|constrain|>json<|message|>"),
            Lit(" to=functions." + tool.name + "<|channel|>commentary json<|message|>"), schema);
      case ToolFormat::kDeepSeekR1:
        return Lit("<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + tool.name + "\n```json\n") + schema +
               Lit("\n```<｜tool▁call▁end｜>");
      case ToolFormat::kDeepSeekV31:
        return Lit("<｜tool▁call▁begin｜>" + tool.name + "<｜tool▁sep｜>") + schema +
               Lit("<｜tool▁call▁end｜>");
      case ToolFormat::kFunctionaryV31:
        return Lit("<function=" + tool.name + ">") + schema + Lit("</function>");
      case ToolFormat::kFunctionaryV32:
        return Lit(tool.name + "\n") + schema;
      case ToolFormat::kCommandR7B:
        return Lit("{\"tool_call_id\": \"") + " [0-9]+ " +
               Lit(fmt::format("\", \"tool_name\": {}, \"parameters\": ", JsonName(tool.name))) + schema +
               Lit("}");
      default:
        return Lit(fmt::format("{{\"name\": {}, \"{}\": ", JsonName(tool.name),
                               format == ToolFormat::kLlama3 ? "parameters" : "arguments")) +
               schema + Lit("}");
    }
  }

  // The calls in the family's frame: `open` call (`sep` call)* `close`, the repetition only
  // when parallel.
  std::string Calls(const std::string& open, const std::string& sep, const std::string& close,
                    bool parallel) const {
    std::string r = (open.empty() ? "" : Lit(open) + " ") + "call";
    if (parallel) r += " (" + (sep.empty() ? "" : Lit(sep) + " ") + "call)*";
    if (!close.empty()) r += " " + Lit(close);
    return r;
  }

  Gbnf BuildGbnf(ToolFormat format, const std::vector<ToolDef>& tools, bool parallel,
                 bool after_opener) const {
    Gbnf g;
    for (const ToolDef& t : tools)
      g.schemas.push_back(t.parameters.is_null() ? std::string(R"({"type": "object", "properties": {}})")
                                                 : t.parameters.dump());
    std::string call = "call ::= ";
    for (size_t i = 0; i < tools.size(); ++i)
      call += (i ? " | " : "") + CallAlternative(format, tools[i], i, g);
    call += "\n";
    auto opened = [&](std::string_view opener, std::string rest) {
      return after_opener ? rest : std::string(opener) + rest;
    };
    std::string root;  // the right-hand side of root ::=
    switch (format) {
      case ToolFormat::kHermes:
      case ToolFormat::kQwen3Coder:
        // <tool_call>\n...\n</tool_call>, repeated, as the Hermes and Qwen templates write calls.
        root =
            Calls(opened("<tool_call>", "\n"), "\n</tool_call>\n<tool_call>\n", "\n</tool_call>", parallel);
        break;
      case ToolFormat::kLlama3:
        root = Calls("", "; ", "", parallel);
        break;
      case ToolFormat::kMistralV3:
        root = Calls(opened("[TOOL_CALLS]", "["), ", ", "]", parallel);
        break;
      case ToolFormat::kMistralV11:
        root = Calls(opened("[TOOL_CALLS]", ""), "[TOOL_CALLS]", "", parallel);
        break;
      case ToolFormat::kGranite:
        root = Calls(opened("<|tool_call|>", "["), ", ", "]", parallel);
        break;
      case ToolFormat::kGeneric:
        root = Calls("{\"tool_calls\": [", ", ", "]}", parallel);
        break;
      case ToolFormat::kDeepSeekV32:
        // The template writes the block two newlines after the text (here: after </think>).
        root = (after_opener ? std::string() : "(" + Lit("\n\n") + ")? ") +
               Calls(opened("<｜DSML｜function_calls>", "\n"), "", "</｜DSML｜function_calls>", parallel);
        break;
      case ToolFormat::kHarmony:
        // One call per message (<|call|> ends the turn); the analysis channel may come first.
        root = "(" + Lit("<|channel|>analysis<|message|>") + " [^<]* " + Lit("<|end|><|start|>assistant") +
               ")? call";
        break;
      case ToolFormat::kDeepSeekR1:
        root = Calls(opened("<｜tool▁calls▁begin｜>", ""), "\n", "<｜tool▁calls▁end｜>", parallel);
        break;
      case ToolFormat::kDeepSeekV31:
        root = Calls(opened("<｜tool▁calls▁begin｜>", ""), "", "<｜tool▁calls▁end｜>", parallel);
        break;
      case ToolFormat::kFunctionaryV31:  // each call carries its <function=NAME> opener
        root = Calls("", "", "", parallel);
        break;
      case ToolFormat::kFunctionaryV32:
        root = Calls("", ">>>", "", parallel);  // the prompt wrote the first ">>>"
        break;
      case ToolFormat::kCommandR7B:
        // The model plans first (free text), then acts, laid out as the template writes actions.
        root =
            (after_opener ? std::string()
                          : "(" + Lit("<|START_THINKING|>") + " [^<]* " + Lit("<|END_THINKING|>") + ")? ") +
            Calls(opened("<|START_ACTION|>", "[\n    "), ",\n    ", "\n]<|END_ACTION|>", parallel);
        break;
    }
    g.text = "root ::= " + root + "\n" + call;
    return g;
  }

 private:
  std::string Lit(std::string_view s) const { return MarkedLit(s, vocab_); }

  const constraint::TokenVocabulary* vocab_;  // null: markers stay text
};
}  // namespace

std::string ToolCallGbnf(ToolFormat format, const std::vector<ToolDef>& tools, bool parallel,
                         bool after_opener, const constraint::TokenVocabulary* vocab) {
  return CallGrammarWriter(vocab).BuildGbnf(format, tools, parallel, after_opener).text;
}

constraint::ConstraintSpec ToolCallGrammar(ToolFormat format, const std::vector<ToolDef>& tools,
                                           bool parallel, bool after_opener,
                                           const constraint::TokenVocabulary* vocab) {
  Gbnf g = CallGrammarWriter(vocab).BuildGbnf(format, tools, parallel, after_opener);
  constraint::ConstraintSpec spec;
  spec.kind = constraint::ConstraintSpec::Kind::kGbnf;
  spec.text = std::move(g.text);
  spec.schemas = std::move(g.schemas);
  return spec;
}

}  // namespace ferry::tool_calls
