// Built-ins: Jinja2 filters, tests, Python methods of str/list/dict and global functions.
#pragma once

#include <string>

#include "template/value.h"

namespace ferry::tmpl {

// Names Jinja2 defines (plus transformers' tojson): an unknown one outside an `if` is a
// compile error in Jinja2, as here; a known one this renderer lacks is an Unsupported error.
bool IsKnownFilter(const std::string& name);
bool IsKnownTest(const std::string& name);

Value ApplyFilter(const std::string& name, const Value& value, CallArgs& args);
bool ApplyTest(const std::string& name, const Value& value, CallArgs& args);

// `obj.name` as the sandboxed Jinja2 resolves it: a method bound to obj, a dict key, or
// undefined (an unsafe mutating method is an undefined raising SecurityError when used).
Value GetAttr(const Value& obj, const std::string& name);
// `obj[key]`: list/str index, dict key, falling back to attributes; undefined when missing.
Value GetItem(const Value& obj, const Value& key);
Value Slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// Raises UndefinedError / SecurityError for an undefined value being used.
[[noreturn]] void RaiseUndefined(const Value& undefined);
// Iterating as Python does: list items, dict keys, string characters; undefined is empty.
List Iterate(const Value& v);
// Strings may not grow past `n` bytes, nor all strings built in one render past 64 * n in
// total; set per render by the interpreter. CheckStringSize(len) accounts one string built.
void SetMaxStringBytes(size_t n);
void CheckStringSize(size_t n);
// Only the length bound, for a string growing inside a loop (checked after each append).
void CheckStringLength(size_t n);
// str % args (printf-style) and str.format(*args, **kwargs).
std::string PercentFormat(const std::string& fmt, const Value& args);

}  // namespace ferry::tmpl
