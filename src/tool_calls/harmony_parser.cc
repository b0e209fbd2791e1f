// gpt-oss Harmony: the answer is a run of messages, each a header up to <|message|> and a body
// up to <|end|>, <|call|> or <|return|> (the last two are end-of-generation tokens the engine
// may have cut). The header names the channel (<|channel|>analysis, commentary, final) and
// for a call the recipient (to=functions.NAME, before or after the channel). analysis bodies
// are reasoning, calls' bodies their JSON arguments, the rest content. The prompt opened the
// first message (<|start|>assistant); later ones start with <|start|>assistant again.
#include <nlohmann/json.hpp>

#include "tool_calls/parse_support.h"

namespace ferry::tool_calls::internal {
namespace {

constexpr std::string_view kStart = "<|start|>", kChannel = "<|channel|>", kMessage = "<|message|>",
                           kEnd = "<|end|>", kCall = "<|call|>", kReturn = "<|return|>",
                           kTo = "to=", kFunctions = "functions.";

// The word after `key` in the header ("" when absent): up to a space or a special token.
std::string_view HeaderField(std::string_view header, std::string_view key) {
  const size_t at = header.find(key);
  if (at == npos) return {};
  const size_t from = at + key.size();
  size_t to = from;
  while (to < header.size() && header[to] != ' ' && header[to] != '<') ++to;
  return header.substr(from, to - from);
}

enum class Opens { kHeader, kMaybe, kNot };

Opens OpensHeader(std::string_view rest) {
  for (std::string_view h : {kStart, kChannel, std::string_view(" to="), kTo}) {
    if (rest.starts_with(h)) return Opens::kHeader;
    if (h.starts_with(rest)) return Opens::kMaybe;
  }
  return Opens::kNot;
}

}  // namespace

void ParseHarmony(std::string_view text, Builder& b) {
  size_t pos = 0;
  while (pos < text.size()) {
    const std::string_view rest = text.substr(pos);
    const Opens opens = OpensHeader(rest);
    if (opens == Opens::kNot) return b.Text(rest);  // not Harmony: plain text
    const size_t m = text.find(kMessage, pos);
    if (opens == Opens::kMaybe || m == npos) return;  // an unfinished header says nothing yet
    const std::string_view header = text.substr(pos, m - pos);
    const size_t body_at = m + kMessage.size();
    size_t end = npos, end_len = 0;
    for (std::string_view t : {kEnd, kCall, kReturn, kStart}) {
      const size_t e = text.find(t, body_at);
      if (e < end) {
        end = e;
        end_len = t == kStart ? 0 : t.size();  // a <|start|> belongs to the next header
      }
    }
    std::string_view body = text.substr(body_at, (end == npos ? text.size() : end) - body_at);
    if (end == npos && !b.final()) body.remove_suffix(PendingSuffix(body, {kEnd, kCall, kReturn, kStart}));
    const std::string_view recipient = HeaderField(header, kTo);
    if (recipient.starts_with(kFunctions) && recipient.size() > kFunctions.size()) {
      ToolCall call;
      call.name = std::string(recipient.substr(kFunctions.size()));
      call.arguments = std::string(body.substr(SkipJsonSpace(body, 0)));
      call.complete = end != npos || (b.final() && nlohmann::json::accept(call.arguments));
      b.Call(std::move(call));
    } else if (HeaderField(header, kChannel) == "analysis") {
      b.Reasoning(body);
    } else {
      b.Text(body);
    }
    if (end == npos) return;
    pos = end + end_len;
  }
}

}  // namespace ferry::tool_calls::internal
