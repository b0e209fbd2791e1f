#include "tool_calls/tool_call_parser.h"

#include "tool_calls/parse_support.h"

namespace ferry::tool_calls {
namespace {

using namespace internal;

// <tool_call> {call} </tool_call>, repeated, with text around.
void ParseHermes(std::string_view text, Builder& b) {
  constexpr std::string_view kOpen = "<tool_call>", kClose = "</tool_call>";
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t m = text.find(kOpen, pos);
    if (m == npos) return b.TailText(text.substr(pos), kOpen);
    b.Text(text.substr(pos, m - pos));
    const size_t j = SkipJsonSpace(text, m + kOpen.size());
    if (j >= text.size()) {
      if (b.final()) b.Text(text.substr(m));
      return;
    }
    size_t next = npos;
    const CallState st = ObjectCall(text, j, b, next);
    if (st == CallState::kUndecided) {
      if (b.final()) b.Text(text.substr(m));
      return;
    }
    if (st == CallState::kNotCall) {
      b.Text(kOpen);
      pos = m + kOpen.size();
      continue;
    }
    if (next == npos) return;
    const size_t k = SkipJsonSpace(text, next);
    const std::string_view rest = text.substr(k);
    if (rest.starts_with(kClose)) {
      pos = k + kClose.size();
    } else if (!b.final() && kClose.starts_with(rest)) {
      return;  // the closer may be on its way
    } else {
      pos = next;
    }
  }
}

// Calls as JSON objects one after another from text[pos] (Llama 3: separated by ';'), the
// rest content. Returns false when the first object was not a call (nothing consumed).
bool ParseJsonCalls(std::string_view text, size_t pos, Builder& b, bool& stop) {
  bool any = false;
  stop = false;
  while (true) {
    const size_t j = SkipJsonSpace(text, pos);
    if (j >= text.size() || text[j] != '{') {
      if (!any) return false;
      b.TailText(text.substr(pos), "");
      return true;
    }
    size_t next = npos;
    const CallState st = ObjectCall(text, j, b, next);
    if (st == CallState::kUndecided) {
      stop = true;
      if (b.final()) b.Text(text.substr(pos));
      return true;
    }
    if (st == CallState::kNotCall) {
      if (!any) return false;
      b.Text(text.substr(pos));
      return true;
    }
    any = true;
    if (next == npos) {
      stop = true;
      return true;
    }
    pos = SkipJsonSpace(text, next);
    if (pos < text.size() && text[pos] == ';') ++pos;
  }
}

// {"name": ..., "parameters": ...} as the answer, or after <|python_tag|> (the special
// token rendered), the text before it content.
void ParseLlama3(std::string_view text, Builder& b) {
  constexpr std::string_view kTag = "<|python_tag|>";
  const size_t j = SkipJsonSpace(text, 0);
  if (j >= text.size() && !b.final()) return;  // nothing decided yet
  bool stop = false;
  if (j < text.size() && text[j] == '{') {
    // A bare object: calls, held while undecided, else content (found below).
    if (ParseJsonCalls(text, 0, b, stop)) return;
  }
  const size_t m = text.find(kTag);
  if (m == npos) return b.TailText(text, kTag);
  b.Text(text.substr(0, m));
  if (!ParseJsonCalls(text, m + kTag.size(), b, stop)) {
    const size_t after = SkipJsonSpace(text, m + kTag.size());
    // Builtin tools (brave_search.call(...)) and other text after the tag stay content.
    if (after < text.size() || b.final()) b.Text(text.substr(m));
  }
}

// TAG [{call}, ...], repeated: Mistral v3's [TOOL_CALLS], Granite's <|tool_call|>.
void ParseTaggedList(std::string_view text, Builder& b, std::string_view tag) {
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t m = text.find(tag, pos);
    if (m == npos) return b.TailText(text.substr(pos), tag);
    b.Text(text.substr(pos, m - pos));
    const size_t j = SkipJsonSpace(text, m + tag.size());
    if (j >= text.size()) {
      if (b.final()) b.Text(text.substr(m));
      return;
    }
    CallState st = CallState::kNotCall;
    if (text[j] != '[') {
      bool stop = false;
      if (ParseJsonCalls(text, j, b, stop)) return;
    } else {
      st = CallList(text, j, b, pos);
      if (st == CallState::kUndecided) return;
    }
    if (st == CallState::kNotCall) {
      b.Text(tag);
      pos = m + tag.size();
    }
  }
}

// [TOOL_CALLS]name[CALL_ID]id[ARGS]{...}, repeated ([CALL_ID] optional: Mistral Small 3.2 has it).
void ParseMistralV11(std::string_view text, Builder& b) {
  constexpr std::string_view kTag = "[TOOL_CALLS]", kArgs = "[ARGS]", kId = "[CALL_ID]";
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t m = text.find(kTag, pos);
    if (m == npos) return b.TailText(text.substr(pos), kTag);
    b.Text(text.substr(pos, m - pos));
    const size_t name_at = m + kTag.size();
    size_t i = name_at;
    while (i < text.size() && NameChar(text[i])) ++i;
    const std::string_view rest = text.substr(i);
    const bool pending = !b.final() && (kArgs.starts_with(rest) || kId.starts_with(rest) ||
                                        (rest.starts_with(kId) && rest.find(kArgs) == npos));
    if (pending) return;
    size_t args_at = npos;
    if (i > name_at && rest.starts_with(kArgs)) {
      args_at = i + kArgs.size();
    } else if (i > name_at && rest.starts_with(kId)) {
      const size_t a = text.find(kArgs, i);
      if (a != npos) args_at = a + kArgs.size();
    }
    if (args_at == npos) {  // not a call after all
      b.Text(kTag);
      pos = name_at;
      continue;
    }
    ToolCall call;
    call.name = std::string(text.substr(name_at, i - name_at));
    const size_t j = SkipJsonSpace(text, args_at);
    if (j >= text.size()) {
      b.Call(std::move(call));
      return;
    }
    PartialParse p = ParsePartialJson(text, j);
    if (!p.root) {
      b.Call(std::move(call));
      pos = j;
      continue;
    }
    const size_t end = p.root->complete ? p.root->end : p.stop;
    if (p.root->type == PartialJson::Type::kObject || p.root->type == PartialJson::Type::kArray ||
        p.root->complete)
      call.arguments = std::string(text.substr(j, end - j));
    call.complete = p.root->complete;
    b.Call(std::move(call));
    if (!p.root->complete && p.invalid_at == npos) return;
    pos = end;
  }
}

// {"tool_calls": [{call}, ...]} as the whole answer, else content.
void ParseGeneric(std::string_view text, Builder& b) {
  const size_t j = SkipJsonSpace(text, 0);
  if (j >= text.size()) return b.final() ? b.Text(text) : void();
  if (text[j] != '{') return b.Text(text);
  PartialParse p = ParsePartialJson(text, j);
  const PartialJson& root = *p.root;
  for (const auto& [k, v] : root.members) {  // keys after the list cannot take calls back
    if (k == "tool_calls") break;
    return b.Text(text);
  }
  const PartialJson* list = root.Find("tool_calls");
  if (!list) {
    if (root.complete || p.invalid_at != npos || b.final()) b.Text(text);
    return;
  }
  if (list->type != PartialJson::Type::kArray) return b.Text(text);
  size_t k = 0;
  for (; k < list->members.size(); ++k) {
    const PartialJson& item = *list->members[k].second;
    ToolCall call;
    const CallState st = ReadCall(text, item, item.complete ? item.end : p.stop, call);
    if (st == CallState::kUndecided && p.invalid_at == npos) {
      if (b.final() && k == 0) b.Text(text);
      return;
    }
    if (st != CallState::kCall) break;
    b.Call(std::move(call));
    if (!item.complete) return;
  }
  if (k == 0 && (list->complete || p.invalid_at != npos)) {
    if (list->members.empty() && root.complete) return;  // {"tool_calls": []}: nothing
    return b.Text(text);
  }
  if (k == 0 && b.final()) return b.Text(text);  // never got to a call
  if (root.complete) b.Text(text.substr(root.end));
}

}  // namespace

ToolParse ParseToolCalls(ToolFormat format, std::string_view text, bool final) {
  Builder b(final);
  switch (format) {
    case ToolFormat::kHermes:
      ParseHermes(text, b);
      break;
    case ToolFormat::kLlama3:
      ParseLlama3(text, b);
      break;
    case ToolFormat::kMistralV3:
      ParseTaggedList(text, b, "[TOOL_CALLS]");
      break;
    case ToolFormat::kGranite:
      ParseTaggedList(text, b, "<|tool_call|>");
      break;
    case ToolFormat::kQwen3Coder:
      ParseQwen3Coder(text, b);
      break;
    case ToolFormat::kDeepSeekV32:
      ParseDsml(text, b);
      break;
    case ToolFormat::kHarmony:
      ParseHarmony(text, b);
      break;
    case ToolFormat::kDeepSeekR1:
    case ToolFormat::kDeepSeekV31:
      ParseDeepSeek(text, b);
      break;
    case ToolFormat::kFunctionaryV31:
      ParseFunctionaryV31(text, b);
      break;
    case ToolFormat::kFunctionaryV32:
      ParseFunctionaryV32(text, b);
      break;
    case ToolFormat::kCommandR7B:
      ParseCommandR7B(text, b);
      break;
    case ToolFormat::kMistralV11:
      ParseMistralV11(text, b);
      break;
    case ToolFormat::kGeneric:
      ParseGeneric(text, b);
      break;
  }
  return std::move(b).Finish();
}

bool IsPrefixParse(const ToolParse& prefix, const ToolParse& full) {
  if (!full.content.starts_with(prefix.content) || !full.reasoning.starts_with(prefix.reasoning) ||
      prefix.calls.size() > full.calls.size())
    return false;
  for (size_t i = 0; i < prefix.calls.size(); ++i) {
    const ToolCall& a = prefix.calls[i];
    const ToolCall& b = full.calls[i];
    if (a.name != b.name || !b.arguments.starts_with(a.arguments)) return false;
    if (a.complete && (!b.complete || a.arguments != b.arguments)) return false;
  }
  return true;
}

}  // namespace ferry::tool_calls
