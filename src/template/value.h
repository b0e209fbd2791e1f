// Value: the dynamic value a chat template computes with, following Python's semantics
// (truthiness, equality, ordering, str()/repr()) as Jinja2 running under CPython sees them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ferry::tmpl {

class Value;
struct CallArgs;
using List = std::vector<Value>;
using NativeFn = std::function<Value(CallArgs&)>;

// A callable: a built-in function, a bound method or a template macro.
struct Callable {
  std::string name;
  NativeFn fn;
};

class Value {
 public:
  enum class Kind : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };
  // What a list or dict stands for in Python (affects repr, tests and attribute access).
  enum class Flavor : uint8_t { kPlain, kTuple, kNamespace, kLoop };

  struct DictData {
    std::vector<std::pair<Value, Value>> items;  // insertion order, like a Python dict
    Flavor flavor = Flavor::kPlain;
  };
  struct ListData {
    List items;
    Flavor flavor = Flavor::kPlain;
  };

  Value() = default;  // undefined
  // An undefined value; `hint` ("'x' is undefined") is the error raised when it is misused.
  static Value Undefined(std::string hint = {});
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double f);
  static Value Str(std::string s);
  static Value NewList(List items = {}, Flavor flavor = Flavor::kPlain);
  static Value NewTuple(List items) { return NewList(std::move(items), Flavor::kTuple); }
  static Value NewDict(Flavor flavor = Flavor::kPlain);
  static Value Function(std::string name, NativeFn fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kBool || kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_callable() const { return kind_ == Kind::kCallable; }
  bool is_tuple() const { return is_list() && list_->flavor == Flavor::kTuple; }
  bool is_namespace() const { return is_dict() && dict_->flavor == Flavor::kNamespace; }
  // A Python Mapping: a plain dict (not a namespace or loop object).
  bool is_mapping() const { return is_dict() && dict_->flavor == Flavor::kPlain; }

  bool bool_value() const { return b_; }
  int64_t int_value() const { return i_; }  // also for bools
  double float_value() const { return f_; }
  double AsDouble() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(i_); }
  const std::string& str() const { return *s_; }   // string, or an undefined's hint
  List& list() const { return list_->items; }
  DictData& dict() const { return *dict_; }
  const Callable& callable() const { return *fn_; }
  // Identity of the shared container (lists, dicts, callables), for `is sameas`.
  const void* identity() const;

  // Dict access (Python equality on keys). Find returns nullptr when missing.
  Value* Find(const Value& key) const;
  Value* Find(const std::string& key) const;
  void Set(Value key, Value value) const;
  void Set(const std::string& key, Value value) const { Set(Str(key), std::move(value)); }

  bool Truthy() const;
  // Python's type name ("str", "int", "dict", ...), for error messages.
  std::string TypeName() const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<ListData> list_;
  std::shared_ptr<DictData> dict_;
  std::shared_ptr<const Callable> fn_;
};

// Arguments of a call: positional then keyword, as evaluated.
struct CallArgs {
  List pos;
  std::vector<std::pair<std::string, Value>> kw;

  // Binds parameters by name: positional first, then keyword; missing ones get `defaults`
  // (undefined when none). Raises on unknown keywords or too many positionals.
  std::vector<Value> Bind(const std::string& fn, const std::vector<std::string>& names,
                          std::vector<Value> defaults = {}) const;
};

// Python semantics.
bool Equals(const Value& a, const Value& b);
// <0, 0, >0; raises TypeError when Python would (e.g. str < int).
int Compare(const Value& a, const Value& b);
std::string ToStr(const Value& v);   // str(v); undefined prints as ""
std::string Repr(const Value& v);    // repr(v)
std::string FormatFloat(double d);   // float.__repr__: 1.0, 0.1, 1e-05, inf
std::string ReprString(const std::string& s);

// UTF-8 helpers: code point count and split into code points (one string each).
size_t CodePointCount(const std::string& s);
std::vector<std::string> CodePoints(const std::string& s);

}  // namespace ferry::tmpl
