#include "tool_calls/parse_support.h"

namespace ferry::tool_calls::internal {

size_t NameEnd(std::string_view text, size_t pos) {
  while (pos < text.size() && NameChar(text[pos])) ++pos;
  return pos;
}

size_t PendingSuffix(std::string_view s, std::initializer_list<std::string_view> openers) {
  size_t best = 0;
  for (std::string_view opener : openers)
    for (size_t k = std::min(s.size(), opener.empty() ? 0 : opener.size() - 1); k > best; --k)
      if (opener.starts_with(s.substr(s.size() - k))) {
        best = k;
        break;
      }
  return best;
}

void Builder::Text(std::string_view s) {
  if (after_call_) {
    size_t i = 0;
    while (i < s.size() && IsSpace(s[i])) ++i;
    s.remove_prefix(i);
    if (s.empty()) return;
    after_call_ = false;
  }
  out_.content += s;
}

void Builder::TailTextAny(std::string_view s, std::initializer_list<std::string_view> openers) {
  if (!final_) s.remove_suffix(PendingSuffix(s, openers));
  Text(s);
}

ToolParse Builder::Finish() && {
  // Trailing whitespace may still precede a call; with calls it is never content.
  if (!final_ || !out_.calls.empty())
    while (!out_.content.empty() && IsSpace(out_.content.back())) out_.content.pop_back();
  return std::move(out_);
}

namespace {

bool AllowedCallKey(std::string_view k, const CallKeys& keys) {
  return k == keys.name || k == keys.args || k == keys.args_alt || k == "type" || k == "id" ||
         k == "tool_call_id";
}

}  // namespace

CallState ReadCall(std::string_view text, const PartialJson& obj, size_t stop, ToolCall& out,
                   const CallKeys& keys) {
  if (obj.type != PartialJson::Type::kObject) return CallState::kNotCall;
  // Keys before the name decide whether this is a call; once the name is complete it is one
  // (a later key cannot take back what a stream has sent), and other keys are ignored.
  for (const auto& [k, v] : obj.members) {
    if (k == keys.name) break;
    if (!AllowedCallKey(k, keys)) return CallState::kNotCall;
  }
  const PartialJson* name = obj.Find(keys.name);
  if (!name) return obj.complete ? CallState::kNotCall : CallState::kUndecided;
  if (name->type != PartialJson::Type::kString) return CallState::kNotCall;
  if (!name->complete) return stop == text.size() ? CallState::kUndecided : CallState::kNotCall;
  if (!DecodeJsonString(text, *name, out.name) || out.name.empty()) return CallState::kNotCall;
  const PartialJson* args = obj.Find(keys.args);
  if (!args) args = obj.Find(keys.args_alt);
  if (!args) {
    out.arguments = obj.complete ? "{}" : "";
  } else if (args->type == PartialJson::Type::kObject || args->type == PartialJson::Type::kArray) {
    out.arguments = std::string(text.substr(args->start, (args->complete ? args->end : stop) - args->start));
  } else if (args->complete && args->type == PartialJson::Type::kString) {
    DecodeJsonString(text, *args, out.arguments);
  } else if (args->complete) {
    out.arguments = std::string(text.substr(args->start, args->end - args->start));
  }
  out.complete = obj.complete;
  return CallState::kCall;
}

CallState ObjectCall(std::string_view text, size_t pos, Builder& b, size_t& next, const CallKeys& keys) {
  PartialParse p = ParsePartialJson(text, pos);
  ToolCall call;
  const CallState st = p.root ? ReadCall(text, *p.root, p.stop, call, keys) : CallState::kNotCall;
  if (st == CallState::kUndecided && p.invalid_at != npos) return CallState::kNotCall;
  if (st != CallState::kCall) return st;
  const bool complete = call.complete;
  b.Call(std::move(call));
  next = complete ? p.root->end : p.invalid_at;  // npos: the text ends inside the call
  return CallState::kCall;
}

CallState CallList(std::string_view text, size_t pos, Builder& b, size_t& next, const CallKeys& keys) {
  PartialParse p = ParsePartialJson(text, pos);
  size_t k = 0;
  for (; k < p.root->members.size(); ++k) {
    ToolCall call;
    const PartialJson& item = *p.root->members[k].second;
    const CallState st = ReadCall(text, item, item.complete ? item.end : p.stop, call, keys);
    if (st == CallState::kUndecided && p.invalid_at == npos) {
      if (b.final()) b.Text(text.substr(item.start));
      return CallState::kUndecided;
    }
    if (st != CallState::kCall) break;
    b.Call(std::move(call));
    if (!item.complete) {
      if (p.invalid_at != npos) b.Text(text.substr(p.invalid_at));
      return CallState::kUndecided;
    }
  }
  // Not a list of calls (the first item is not one, or the list is empty or broken).
  if (k == 0 && (p.root->complete || p.invalid_at != npos || !p.root->members.empty()))
    return CallState::kNotCall;
  if (k < p.root->members.size()) {
    b.Text(text.substr(p.root->members[k].second->start));
    return CallState::kUndecided;
  }
  if (!p.root->complete) {
    if (p.invalid_at != npos) b.Text(text.substr(p.invalid_at));
    return CallState::kUndecided;
  }
  next = p.root->end;
  return CallState::kCall;
}

size_t ReadArguments(std::string_view text, size_t pos, ToolCall& call, size_t& invalid) {
  invalid = npos;
  const size_t j = SkipJsonSpace(text, pos);
  if (j >= text.size()) return npos;
  PartialParse p = ParsePartialJson(text, j);
  if (!p.root) {
    invalid = j;
    return npos;
  }
  const size_t end = p.root->complete ? p.root->end : p.stop;
  if (p.root->type == PartialJson::Type::kObject || p.root->type == PartialJson::Type::kArray ||
      p.root->complete)
    call.arguments = std::string(text.substr(j, end - j));
  call.complete = p.root->complete;
  if (!p.root->complete) {
    invalid = p.invalid_at;
    return npos;
  }
  return end;
}

CallState Expect(std::string_view text, size_t& pos, std::string_view lit, const Builder& b) {
  const size_t p = SkipJsonSpace(text, pos);
  const std::string_view rest = text.substr(p);
  if (rest.starts_with(lit)) {
    pos = p + lit.size();
    return CallState::kCall;
  }
  return !b.final() && lit.starts_with(rest) ? CallState::kUndecided : CallState::kNotCall;
}

}  // namespace ferry::tool_calls::internal
