// ChatTemplate: parse once, render with transformers' globals; exceptions stop at this boundary.
#include "template/chat_template.h"

#include <chrono>

#include "template/builtins.h"
#include "template/error.h"
#include "template/json.h"
#include "template/lexer.h"
#include "template/parser.h"

namespace ferry {

struct ChatTemplate::Impl {
  tmpl::Body body;
};

namespace {

using tmpl::CallArgs;
using tmpl::Raise;
using tmpl::Value;

Status ToStatus(const tmpl::TemplateError& e) { return Status(e.code(), e.what()); }

std::string Strftime(const std::string& fmt, const std::tm& tm) {
  if (fmt.empty()) return "";
  std::string out(fmt.size() * 4 + 64, '\0');
  for (int tries = 0; tries < 4; ++tries) {
    size_t n = std::strftime(out.data(), out.size(), fmt.c_str(), &tm);
    if (n > 0) {
      out.resize(n);
      return out;
    }
    if (out.size() > (1u << 20)) break;
    out.resize(out.size() * 4);
  }
  return "";  // formats that legitimately produce nothing (e.g. "%p" in some locales)
}

Value Globals(const ChatRenderOptions& options) {
  Value g = Value::NewDict();
  g.Set("raise_exception", Value::Function("raise_exception", [](CallArgs& a) -> Value {
          throw tmpl::TemplateError("TemplateError", a.pos.empty() ? std::string() : tmpl::ToStr(a.pos[0]));
        }));
  std::tm now{};
  if (options.now) {
    now = *options.now;
  } else {
    std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    localtime_r(&t, &now);
  }
  g.Set("strftime_now", Value::Function("strftime_now", [now](CallArgs& a) -> Value {
          if (a.pos.size() != 1 || !a.pos[0].is_string()) Raise("TypeError", "strftime_now() takes one format string");
          if (a.pos[0].str().find('\0') != std::string::npos) Raise("ValueError", "embedded null character");
          return Value::Str(Strftime(a.pos[0].str(), now));
        }));
  g.Set("range", Value::Function("range", [](CallArgs& a) -> Value {
          if (a.pos.empty() || a.pos.size() > 3) Raise("TypeError", "range expected 1 to 3 arguments, got {}", a.pos.size());
          for (const Value& v : a.pos)
            if (!v.is_int() && !v.is_bool()) Raise("TypeError", "'{}' object cannot be interpreted as an integer", v.TypeName());
          int64_t start = a.pos.size() > 1 ? a.pos[0].int_value() : 0;
          int64_t stop = a.pos.size() > 1 ? a.pos[1].int_value() : a.pos[0].int_value();
          int64_t step = a.pos.size() > 2 ? a.pos[2].int_value() : 1;
          if (step == 0) Raise("ValueError", "range() arg 3 must not be zero");
          // The sandbox refuses ranges longer than MAX_RANGE = 100000.
          __int128 count = step > 0 ? ((__int128)stop - start + step - 1) / step : ((__int128)start - stop - step - 1) / -step;
          if (count > 100000)
            Raise("OverflowError", "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
          tmpl::List out;
          for (__int128 i = 0; i < count; ++i) out.push_back(Value::Int(static_cast<int64_t>(start + i * step)));
          return Value::NewList(std::move(out));
        }));
  g.Set("namespace", Value::Function("namespace", [](CallArgs& a) -> Value {
          Value ns = Value::NewDict(Value::Flavor::kNamespace);
          for (const Value& p : a.pos) {
            if (!p.is_mapping()) Raise("TypeError", "namespace() positional argument must be a mapping");
            for (const auto& [k, v] : p.dict().items) ns.Set(k, v);
          }
          for (const auto& [k, v] : a.kw) ns.Set(k, v);
          return ns;
        }));
  g.Set("dict", Value::Function("dict", [](CallArgs& a) -> Value {
          Value d = Value::NewDict();
          for (const Value& p : a.pos) {
            if (!p.is_mapping()) tmpl::RaiseUnsupported("dict() from a non-mapping");
            for (const auto& [k, v] : p.dict().items) d.Set(k, v);
          }
          for (const auto& [k, v] : a.kw) d.Set(k, v);
          return d;
        }));
  for (const char* name : {"lipsum", "cycler", "joiner"}) {
    std::string n = name;
    g.Set(n, Value::Function(n, [n](CallArgs&) -> Value { tmpl::RaiseUnsupported("global function '{}()'", n); }));
  }
  return g;
}

}  // namespace

StatusOr<ChatTemplate> ChatTemplate::Parse(const std::string& source) {
  try {
    auto impl = std::make_shared<Impl>();
    impl->body = tmpl::Parse(tmpl::Lex(source));
    ChatTemplate t;
    t.impl_ = std::move(impl);
    return t;
  } catch (const tmpl::TemplateError& e) {
    return ToStatus(e);
  }
}

StatusOr<std::string> ChatTemplate::Render(const nlohmann::ordered_json& context, const ChatRenderOptions& options) const {
  if (!context.is_object()) return InvalidArgumentError("chat template context must be a JSON object");
  try {
    Value globals = Globals(options);
    for (const auto& [k, v] : context.items()) globals.Set(k, tmpl::FromJson(v));
    tmpl::Interpreter interp(globals, options.limits);
    return interp.Render(impl_->body);
  } catch (const tmpl::TemplateError& e) {
    return ToStatus(e);
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError("out of memory while rendering the chat template");
  }
}

StatusOr<std::string> ChatTemplate::Render(const ChatRequest& request, const ChatRenderOptions& options) const {
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  ctx["messages"] = request.messages;
  ctx["add_generation_prompt"] = request.add_generation_prompt;
  ctx["bos_token"] = request.bos_token;
  ctx["eos_token"] = request.eos_token;
  if (request.extra.is_object())
    for (const auto& [k, v] : request.extra.items()) ctx[k] = v;
  return Render(ctx, options);
}

}  // namespace ferry
