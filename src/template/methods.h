// Python methods of str, list and dict that templates call (`s.strip()`, `d.items()`, ...).
#pragma once

#include <string>

#include "template/value.h"

namespace ferry::tmpl {

enum class MethodKind { kNone, kSafe, kUnsafe };  // unsafe: mutates a list/dict (sandbox refuses)
MethodKind FindMethod(const Value& obj, const std::string& name);
Value CallMethod(const Value& obj, const std::string& name, CallArgs& args);

// Python's str.strip family and whitespace predicate (ASCII and common Unicode spaces).
std::string PyStrip(const std::string& s, const Value& chars, bool left, bool right);
std::vector<std::string> PySplit(const std::string& s, const Value& sep, int64_t maxsplit);
std::vector<std::string> PySplitLines(const std::string& s, bool keepends);
std::string PyUpper(const std::string& s);
std::string PyLower(const std::string& s);
std::string PyTitle(const std::string& s);
std::string PyCapitalize(const std::string& s);
std::string PyReplace(const std::string& s, const std::string& old, const std::string& repl, int64_t count);
// str.format(*args, **kwargs) for {} / {0} / {name} fields with optional !r/!s; specs unsupported.
std::string PyFormat(const std::string& fmt, const CallArgs& args);

}  // namespace ferry::tmpl
