// What the tool-call parsers of every family share (internal to tool_calls/): the builder
// that collects content, reasoning and calls in output order with the hold-back rules that
// keep the parse monotone, and readers for the JSON shapes calls take.
#pragma once

#include <initializer_list>
#include <string_view>

#include "tool_calls/partial_json.h"
#include "tool_calls/tool_call_parser.h"

namespace ferry::tool_calls::internal {

constexpr size_t npos = std::string_view::npos;

inline bool IsSpace(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

// A function name's characters (tool names are a-zA-Z0-9_-; '.' for namespaced builtins).
inline bool NameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.';
}

// The end of a run of name characters from `pos`.
size_t NameEnd(std::string_view text, size_t pos);

// The length of the longest suffix of `s` that is a proper prefix of one of `openers` (text
// that may still become one of them).
size_t PendingSuffix(std::string_view s, std::initializer_list<std::string_view> openers);

enum class CallState { kCall, kNotCall, kUndecided };

// Collects content, reasoning and calls in output order.
class Builder {
 public:
  explicit Builder(bool final) : final_(final) {}
  // Text outside calls; right after a call its leading whitespace is dropped.
  void Text(std::string_view s);
  // Text that ends the output so far: a suffix that could begin an opener is held back.
  void TailText(std::string_view s, std::string_view opener) { TailTextAny(s, {opener}); }
  void TailTextAny(std::string_view s, std::initializer_list<std::string_view> openers);
  // A reasoning channel's text (Harmony analysis, Command R7B thinking).
  void Reasoning(std::string_view s) { out_.reasoning += s; }
  void Call(ToolCall c) {
    out_.calls.push_back(std::move(c));
    after_call_ = true;
  }
  bool final() const { return final_; }
  ToolParse Finish() &&;

 private:
  bool final_;
  bool after_call_ = false;
  ToolParse out_;
};

// The keys of a call object: {"name": ..., "arguments" | "parameters": ...} by default,
// Command R7B's {"tool_call_id", "tool_name", "parameters"}.
struct CallKeys {
  std::string_view name = "name";
  std::string_view args = "arguments";
  std::string_view args_alt = "parameters";
};

// A call object parsed so far. `stop`: where its parse stopped.
CallState ReadCall(std::string_view text, const PartialJson& obj, size_t stop, ToolCall& out,
                   const CallKeys& keys = {});

// One call object at text[pos]; `next`: where scanning goes on (npos: the output ends inside
// it). On kNotCall nothing is added.
CallState ObjectCall(std::string_view text, size_t pos, Builder& b, size_t& next, const CallKeys& keys = {});

// A JSON list of call objects at text[pos] ('['). kNotCall: it is not one (nothing added).
// kUndecided: parsing stops here (the output ends inside it, or its rest was given as
// content). kCall: the list is complete, `next` is one past it.
CallState CallList(std::string_view text, size_t pos, Builder& b, size_t& next, const CallKeys& keys = {});

// A JSON value as a call's arguments from text[pos] (after whitespace) up to where it stops:
// its text so far when it is an object or array, once complete otherwise. Returns one past
// the value when complete, npos when the text ends inside it (or it is not JSON: then
// `invalid` is set to where).
size_t ReadArguments(std::string_view text, size_t pos, ToolCall& call, size_t& invalid);

// Skips `lit` (after whitespace) at text[pos]. kCall: skipped (pos moved past it);
// kUndecided: the output so far ends in a prefix of it; kNotCall: something else is there.
CallState Expect(std::string_view text, size_t& pos, std::string_view lit, const Builder& b);

// The families whose parsers live in files of their own (one per family).
void ParseQwen3Coder(std::string_view text, Builder& b);      // xml_call_parser.cc
void ParseDsml(std::string_view text, Builder& b);            // xml_call_parser.cc (DeepSeek V3.2)
void ParseHarmony(std::string_view text, Builder& b);         // harmony_parser.cc
void ParseDeepSeek(std::string_view text, Builder& b);        // deepseek_parser.cc
void ParseFunctionaryV31(std::string_view text, Builder& b);  // functionary_parser.cc
void ParseFunctionaryV32(std::string_view text, Builder& b);  // functionary_parser.cc
void ParseCommandR7B(std::string_view text, Builder& b);      // command_r7b_parser.cc

}  // namespace ferry::tool_calls::internal
