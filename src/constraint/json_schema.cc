#include "constraint/json_schema.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "base/utf8.h"
#include "constraint/json_numbers.h"
#include "constraint/regex_compiler.h"

namespace ferry::constraint {

namespace {

using Json = nlohmann::ordered_json;

const std::set<std::string> kAnnotations = {"title",    "description", "default",  "examples",
                                            "$schema",  "$id",         "$comment", "deprecated",
                                            "readOnly", "writeOnly",   "$defs",    "definitions"};
const std::set<std::string> kKeywords = {"type",
                                         "properties",
                                         "required",
                                         "additionalProperties",
                                         "items",
                                         "prefixItems",
                                         "minItems",
                                         "maxItems",
                                         "enum",
                                         "const",
                                         "anyOf",
                                         "oneOf",
                                         "allOf",
                                         "$ref",
                                         "minLength",
                                         "maxLength",
                                         "pattern",
                                         "format",
                                         "minimum",
                                         "maximum",
                                         "exclusiveMinimum",
                                         "exclusiveMaximum"};

// Regexes of the supported string formats (RFC 3339 date/time, RFC 4122 text form, a
// practical email subset).
const std::map<std::string, std::string> kFormats = {
    {"date", R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]))"},
    {"time", R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))"},
    {"date-time",
     R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))"},
    {"uuid", R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"},
    {"email",
     R"([A-Za-z0-9_%+-]+(\.[A-Za-z0-9_%+-]+)*@[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)+)"},
};

// Shared JSON building blocks (whitespace, strings, numbers, any value).
class JsonRules {
 public:
  JsonRules(Grammar& g, const JsonGrammarOptions& o) : g_(g), o_(o) {}

  Expr Ws() {
    if (ws_ < 0) {
      ws_ = g_.NewRule("ws");
      g_.Define(ws_, Expr::Repeat(Expr::Class({{' ', ' '}, {'\t', '\t'}, {'\n', '\n'}, {'\r', '\r'}}), 0,
                                  std::max(0, o_.max_whitespace)));
    }
    return Expr::Ref(ws_);
  }
  static CodepointRanges RawChars() { return NegateRanges({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}); }
  Expr Escape() {
    return Rule(escape_, "escape", [&] {
      return Expr::Seq(
          {Expr::Literal("\\"), Expr::Alt({Expr::Class({{'"', '"'},
                                                        {'\\', '\\'},
                                                        {'/', '/'},
                                                        {'b', 'b'},
                                                        {'f', 'f'},
                                                        {'n', 'n'},
                                                        {'r', 'r'},
                                                        {'t', 't'}}),
                                           Expr::Seq({Expr::Literal("u"), Expr::Repeat(Hex(), 4, 4)})})});
    });
  }
  Expr StringChar() {
    return Rule(char_, "char", [&] { return Expr::Alt({Expr::Class(RawChars()), Escape()}); });
  }
  // A string other than each of `names` (written raw: none may need a JSON escape). A key
  // spelled with escapes (\u0061 for a) counts as different.
  Expr StringExcept(const std::vector<std::u32string>& names) {
    return Expr::Seq({Expr::Literal("\""), Except(names, 0), Expr::Literal("\"")});
  }
  Expr String(int32_t min_len = 0, int32_t max_len = -1) {
    return Expr::Seq(
        {Expr::Literal("\""), Expr::Repeat(StringChar(), min_len, max_len), Expr::Literal("\"")});
  }
  Expr AnyString() {
    return Rule(string_, "string", [&] { return String(); });
  }
  Expr Number() {
    return Rule(number_, "number", [&] {
      Expr digit = Expr::Class({{'0', '9'}});
      Expr integer = Expr::Seq(
          {Expr::Optional(Expr::Literal("-")),
           Expr::Alt({Expr::Literal("0"), Expr::Seq({Expr::Class({{'1', '9'}}), Expr::Star(digit)})})});
      Expr frac = Expr::Optional(Expr::Seq({Expr::Literal("."), Expr::Repeat(digit, 1, -1)}));
      Expr exp = Expr::Optional(
          Expr::Seq({Expr::Class({{'e', 'e'}, {'E', 'E'}}),
                     Expr::Optional(Expr::Class({{'+', '+'}, {'-', '-'}})), Expr::Repeat(digit, 1, -1)}));
      return Expr::Seq({std::move(integer), std::move(frac), std::move(exp)});
    });
  }
  Expr Integer() {
    return Rule(integer_, "integer", [&] {
      return Expr::Seq({Expr::Optional(Expr::Literal("-")),
                        Expr::Alt({Expr::Literal("0"), Expr::Seq({Expr::Class({{'1', '9'}}),
                                                                  Expr::Star(Expr::Class({{'0', '9'}}))})})});
    });
  }
  Expr Boolean() { return Expr::Alt({Expr::Literal("true"), Expr::Literal("false")}); }
  // Any JSON value / object / array (defined together: they are mutually recursive).
  Expr AnyValue() {
    DefineAny();
    return Expr::Ref(value_);
  }
  Expr AnyObject() {
    DefineAny();
    return Expr::Ref(object_);
  }
  Expr AnyArray() {
    DefineAny();
    return Expr::Ref(array_);
  }
  // "{" ws (first (ws "," ws next)* ws)? "}" over members / "[" ... "]" over items.
  Expr Container(const char* open, const char* close, Expr first, Expr next) {
    Expr sep = Expr::Seq({Ws(), Expr::Literal(","), Ws()});
    Expr body = Expr::Seq({std::move(first), Expr::Star(Expr::Seq({sep, std::move(next)})), Ws()});
    return Expr::Seq({Expr::Literal(open), Ws(), Expr::Optional(std::move(body)), Expr::Literal(close)});
  }
  Expr Member(Expr key, Expr value) {
    return Expr::Seq({std::move(key), Ws(), Expr::Literal(":"), Ws(), std::move(value)});
  }

 private:
  template <typename F>
  Expr Rule(int32_t& id, const char* name, F make) {
    if (id < 0) {
      id = g_.NewRule(name);
      g_.Define(id, make());
    }
    return Expr::Ref(id);
  }
  static Expr Hex() { return Expr::Class({{'0', '9'}, {'A', 'F'}, {'a', 'f'}}); }
  // Continuations of the common prefix of `names` (all share their first `depth` code points)
  // that do not spell one of them: end (unless a name ends here), a child's character and
  // on, or any other character and then anything.
  Expr Except(const std::vector<std::u32string>& names, size_t depth) {
    std::vector<Expr> alts;
    bool ends = false;
    std::map<char32_t, std::vector<std::u32string>> children;
    for (const auto& n : names) {
      if (n.size() == depth)
        ends = true;
      else
        children[n[depth]].push_back(n);
    }
    if (!ends) alts.push_back(Expr::Empty());
    CodepointRanges others = RawChars();
    for (auto& [c, group] : children) {
      std::string lit;
      utf8::AppendCodepoint(lit, static_cast<uint32_t>(c));
      alts.push_back(Expr::Seq({Expr::Literal(lit), Except(group, depth + 1)}));
      CodepointRanges cut;
      for (auto [lo, hi] : others) {
        if (c < lo || c > hi) {
          cut.push_back({lo, hi});
          continue;
        }
        if (c > lo) cut.push_back({lo, static_cast<uint32_t>(c) - 1});
        if (c < hi) cut.push_back({static_cast<uint32_t>(c) + 1, hi});
      }
      others = cut;
    }
    alts.push_back(Expr::Seq({Expr::Alt({Expr::Class(others), Escape()}), Expr::Star(StringChar())}));
    return Expr::Alt(std::move(alts));
  }
  void DefineAny() {
    if (value_ >= 0) return;
    value_ = g_.NewRule("value");
    object_ = g_.NewRule("object");
    array_ = g_.NewRule("array");
    g_.Define(value_, Expr::Alt({Expr::Ref(object_), Expr::Ref(array_), AnyString(), Number(), Boolean(),
                                 Expr::Literal("null")}));
    g_.Define(object_, Container("{", "}", Member(AnyString(), Expr::Ref(value_)),
                                 Member(AnyString(), Expr::Ref(value_))));
    g_.Define(array_, Container("[", "]", Expr::Ref(value_), Expr::Ref(value_)));
  }

  Grammar& g_;
  JsonGrammarOptions o_;
  int32_t ws_ = -1, escape_ = -1, char_ = -1, string_ = -1, number_ = -1, integer_ = -1, value_ = -1,
          object_ = -1, array_ = -1;
};

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const JsonGrammarOptions& o) : root_(root), rules_(g_, o) {}

  StatusOr<Grammar> Run() {
    int32_t root = g_.RuleId("root");
    FERRY_ASSIGN_OR_RETURN(Expr body, Compile(root_, "#"));
    g_.Define(root, std::move(body));
    g_.set_root(root);
    return std::move(g_);
  }

 private:
  Status Error(const std::string& path, const std::string& what) const {
    return InvalidArgumentError("JSON schema at '{}': {}", path, what);
  }

  // A subschema as its own rule (shared by reference wherever it is used).
  StatusOr<Expr> CompileRule(const Json& s, const std::string& path, const std::string& hint) {
    FERRY_ASSIGN_OR_RETURN(Expr e, Compile(s, path));
    if (e.kind == Expr::Kind::kRef) return e;
    int32_t id = g_.NewRule(hint);
    g_.Define(id, std::move(e));
    return Expr::Ref(id);
  }

  // Exactly this value (arrays and objects with the usual whitespace between tokens).
  Expr Value(const Json& v) {
    std::vector<Expr> seq;
    Expr sep = Expr::Seq({rules_.Ws(), Expr::Literal(","), rules_.Ws()});
    if (v.is_array() && !v.empty()) {
      seq.push_back(Expr::Literal("["));
      for (size_t i = 0; i < v.size(); ++i) seq.push_back(Expr::Seq({i ? sep : rules_.Ws(), Value(v[i])}));
      seq.push_back(Expr::Seq({rules_.Ws(), Expr::Literal("]")}));
    } else if (v.is_object() && !v.empty()) {
      seq.push_back(Expr::Literal("{"));
      bool first = true;
      for (const auto& [k, x] : v.items()) {
        seq.push_back(
            Expr::Seq({first ? rules_.Ws() : sep, rules_.Member(Expr::Literal(Json(k).dump()), Value(x))}));
        first = false;
      }
      seq.push_back(Expr::Seq({rules_.Ws(), Expr::Literal("}")}));
    } else if (v.is_array() || v.is_object()) {
      return Expr::Seq(
          {Expr::Literal(v.is_array() ? "[" : "{"), rules_.Ws(), Expr::Literal(v.is_array() ? "]" : "}")});
    } else {
      return Expr::Literal(v.dump());
    }
    return Expr::Seq(std::move(seq));
  }

  StatusOr<const Json*> Resolve(const std::string& ref, const std::string& path) const {
    if (ref.empty() || ref[0] != '#')
      return Error(path, "$ref '" + ref + "' is not local (only '#...' references are supported)");
    try {
      const Json& target = ref == "#" ? root_ : root_.at(Json::json_pointer(ref.substr(1)));
      return &target;
    } catch (const std::exception&) {
      return Error(path, "$ref '" + ref + "' does not resolve inside the schema");
    }
  }

  StatusOr<Expr> Compile(const Json& s, const std::string& path) {
    if (++depth_ > 64) return Error(path, "schema nested too deeply");
    struct Guard {
      int& d;
      ~Guard() { --d; }
    } guard{depth_};
    if (s.is_boolean()) return s.get<bool>() ? rules_.AnyValue() : Expr::Class({});
    if (!s.is_object()) return Error(path, "a schema must be an object or a boolean");
    for (const auto& [k, v] : s.items()) {
      if (!kKeywords.count(k) && !kAnnotations.count(k))
        return Error(path, "unsupported JSON Schema keyword '" + k + "'");
    }
    if (s.contains("$ref")) {
      if (!s["$ref"].is_string()) return Error(path, "$ref must be a string");
      std::string ref = s["$ref"].get<std::string>();
      for (const auto& [k, v] : s.items())
        if (!kAnnotations.count(k) && k != "$ref")
          return Error(path, "'" + k + "' beside $ref is not supported");
      auto it = refs_.find(ref);
      if (it != refs_.end()) return Expr::Ref(it->second);
      FERRY_ASSIGN_OR_RETURN(const Json* target, Resolve(ref, path));
      int32_t id = g_.NewRule("ref");
      refs_[ref] = id;  // before compiling the target: recursion refers back to it
      FERRY_ASSIGN_OR_RETURN(Expr body, Compile(*target, ref));
      g_.Define(id, std::move(body));
      return Expr::Ref(id);
    }
    if (s.contains("const")) return Value(s["const"]);
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) return Error(path, "enum must be a non-empty array");
      std::vector<Expr> alts;
      for (const Json& v : s["enum"]) alts.push_back(Value(v));
      return Expr::Alt(std::move(alts));
    }
    for (const char* k : {"anyOf", "oneOf"}) {
      if (!s.contains(k)) continue;
      const Json& list = s[k];
      if (!list.is_array() || list.empty()) return Error(path, std::string(k) + " must be a non-empty array");
      for (const auto& [key, v] : s.items())
        if (!kAnnotations.count(key) && key != k)
          return Error(path,
                       "'" + key + "' beside " + k + " is not supported; move it into each alternative");
      std::vector<Expr> alts;
      for (size_t i = 0; i < list.size(); ++i) {
        FERRY_ASSIGN_OR_RETURN(Expr e, CompileRule(list[i], path + "/" + k + "/" + std::to_string(i), "alt"));
        alts.push_back(std::move(e));
      }
      return Expr::Alt(std::move(alts));
    }
    if (s.contains("allOf")) {
      FERRY_ASSIGN_OR_RETURN(Json merged, MergeAllOf(s, path));
      return Compile(merged, path);
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const Json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const Json& x : t) {
          if (!x.is_string()) return Error(path, "type list entries must be strings");
          types.push_back(x.get<std::string>());
        }
      } else {
        return Error(path, "type must be a string or a non-empty list of strings");
      }
    } else {
      types.push_back(InferType(s));
    }
    std::vector<Expr> alts;
    for (const std::string& t : types) {
      FERRY_ASSIGN_OR_RETURN(Expr e, CompileType(s, t, path));
      alts.push_back(std::move(e));
    }
    return Expr::Alt(std::move(alts));
  }

  // Without "type", the keywords present say which type is meant (as llama.cpp and XGrammar
  // read such schemas); none: any value.
  static std::string InferType(const Json& s) {
    for (const char* k : {"properties", "required", "additionalProperties"})
      if (s.contains(k)) return "object";
    for (const char* k : {"items", "prefixItems", "minItems", "maxItems"})
      if (s.contains(k)) return "array";
    for (const char* k : {"minLength", "maxLength", "pattern", "format"})
      if (s.contains(k)) return "string";
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
      if (s.contains(k)) return "number";
    return "any";
  }

  StatusOr<Json> MergeAllOf(const Json& s, const std::string& path) {
    const Json& list = s["allOf"];
    if (!list.is_array() || list.empty()) return Error(path, "allOf must be a non-empty array");
    Json merged = Json::object();
    merged["type"] = "object";
    Json props = Json::object();
    std::vector<std::string> required;
    bool closed = false;
    // A closed part (additionalProperties false) forbids every key it does not declare,
    // whichever part declares it.
    std::vector<std::set<std::string>> closed_sets;
    auto absorb = [&](const Json& part, const std::string& where) -> Status {
      if (!part.is_object()) return Error(where, "allOf entries must be object schemas");
      for (const auto& [k, v] : part.items()) {
        if (k == "properties") {
          for (const auto& [name, ps] : v.items()) {
            if (props.contains(name) && props[name] != ps)
              return Error(where, "allOf: property '" + name + "' is defined twice differently");
            props[name] = ps;
          }
        } else if (k == "required") {
          for (const Json& r : v) required.push_back(r.get<std::string>());
        } else if (k == "additionalProperties") {
          if (!v.is_boolean()) return Error(where, "allOf: additionalProperties must be a boolean here");
          if (!v.get<bool>()) {
            closed = true;
            std::set<std::string> names;
            if (part.contains("properties"))
              for (const auto& [name, ps] : part["properties"].items()) names.insert(name);
            closed_sets.push_back(std::move(names));
          }
        } else if (k == "type") {
          if (v != "object") return Error(where, "allOf is supported for object schemas only");
        } else if (k != "allOf" && !kAnnotations.count(k)) {
          return Error(
              where, "allOf: '" + k + "' is not supported (only properties, required, additionalProperties)");
        }
      }
      return Status::Ok();
    };
    FERRY_RETURN_IF_ERROR(absorb(s, path));
    for (size_t i = 0; i < list.size(); ++i) {
      const Json* part = &list[i];
      std::string where = path + "/allOf/" + std::to_string(i);
      if (part->is_object() && part->contains("$ref")) {
        FERRY_ASSIGN_OR_RETURN(part, Resolve((*part)["$ref"].get<std::string>(), where));
      }
      if (part->is_object() && part->contains("allOf")) return Error(where, "nested allOf is not supported");
      FERRY_RETURN_IF_ERROR(absorb(*part, where));
    }
    Json allowed = Json::object();
    for (const auto& [name, ps] : props.items()) {
      bool ok = true;
      for (const auto& set : closed_sets) ok = ok && set.count(name);
      if (ok) allowed[name] = ps;
    }
    for (const auto& r : required) {
      bool ok = true;
      for (const auto& set : closed_sets) ok = ok && set.count(r);
      if (!ok) allowed[r] = false;  // required yet forbidden: no instance is valid
    }
    merged["properties"] = allowed;
    Json req = Json::array();
    std::set<std::string> seen;
    for (const auto& r : required)
      if (seen.insert(r).second) req.push_back(r);
    merged["required"] = req;
    if (closed) merged["additionalProperties"] = false;
    return merged;
  }

  StatusOr<Expr> CompileType(const Json& s, const std::string& t, const std::string& path) {
    if (t == "any") return rules_.AnyValue();
    if (t == "null") return Expr::Literal("null");
    if (t == "boolean") return rules_.Boolean();
    if (t == "string") return CompileString(s, path);
    if (t == "integer" || t == "number") return CompileNumber(s, t == "integer", path);
    if (t == "array") return CompileArray(s, path);
    if (t == "object") return CompileObject(s, path);
    return Error(path, "unknown type '" + t + "'");
  }

  StatusOr<int32_t> Count(const Json& s, const char* k, const std::string& path, int32_t dflt) {
    if (!s.contains(k)) return dflt;
    const Json& v = s[k];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 10000)
      return Error(path, std::string(k) + " must be an integer in [0, 10000]");
    return static_cast<int32_t>(v.get<int64_t>());
  }

  StatusOr<Expr> CompileString(const Json& s, const std::string& path) {
    FERRY_ASSIGN_OR_RETURN(int32_t min_len, Count(s, "minLength", path, 0));
    FERRY_ASSIGN_OR_RETURN(int32_t max_len, Count(s, "maxLength", path, -1));
    if (max_len >= 0 && max_len < min_len) return Error(path, "maxLength is below minLength");
    bool lengths = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("format") || s.contains("pattern")) {
      if (lengths)
        return Error(path, "minLength/maxLength together with pattern or format are not supported");
      if (s.contains("format") && s.contains("pattern"))
        return Error(path, "pattern together with format is not supported");
      std::string pattern;
      RegexOptions ro;
      ro.json_string = true;
      if (s.contains("format")) {
        if (!s["format"].is_string()) return Error(path, "format must be a string");
        auto it = kFormats.find(s["format"].get<std::string>());
        if (it == kFormats.end())
          return Error(path, "unsupported string format '" + s["format"].get<std::string>() +
                                 "' (supported: date, time, date-time, uuid, email)");
        pattern = it->second;
      } else {
        if (!s["pattern"].is_string()) return Error(path, "pattern must be a string");
        pattern = s["pattern"].get<std::string>();
        ro.search = true;
      }
      auto content = CompileRegex(pattern, ro);
      if (!content.ok()) return Error(path, content.status().message());
      return Expr::Seq({Expr::Literal("\""), std::move(content).value(), Expr::Literal("\"")});
    }
    if (!lengths) return rules_.AnyString();
    return rules_.String(min_len, max_len);
  }

  StatusOr<std::optional<NumberBound>> Bound(const Json& s, bool integer, bool lower,
                                             const std::string& path) {
    std::optional<NumberBound> out;
    for (bool exclusive : {false, true}) {
      const char* k =
          lower ? (exclusive ? "exclusiveMinimum" : "minimum") : (exclusive ? "exclusiveMaximum" : "maximum");
      if (!s.contains(k)) continue;
      const Json& v = s[k];
      if (!v.is_number()) return Error(path, std::string(k) + " must be a number");
      double d = v.get<double>();
      if (!(std::fabs(d) < 1e18))
        return Error(path, std::string(k) + " is out of the supported range (|x| < 1e18)");
      NumberBound b;
      if (d != std::floor(d)) {
        if (!integer)
          return Error(path, std::string(k) + " = " + v.dump() + ": bounds of a number must be integers");
        // An integer above 2.5 is at least 3, whether or not the bound is exclusive.
        b.value = static_cast<int64_t>(lower ? std::ceil(d) : std::floor(d));
      } else {
        b.value = v.is_number_integer() ? v.get<int64_t>() : static_cast<int64_t>(d);
        b.exclusive = exclusive;
      }
      if (integer && b.exclusive) {
        b.value += lower ? 1 : -1;
        b.exclusive = false;
      }
      // Two bounds on one side: the tighter one.
      if (!out || (lower ? (b.value > out->value || (b.value == out->value && b.exclusive))
                         : (b.value < out->value || (b.value == out->value && b.exclusive))))
        out = b;
    }
    return out;
  }

  StatusOr<Expr> CompileNumber(const Json& s, bool integer, const std::string& path) {
    FERRY_ASSIGN_OR_RETURN(auto min, Bound(s, integer, true, path));
    FERRY_ASSIGN_OR_RETURN(auto max, Bound(s, integer, false, path));
    if (!min && !max) return integer ? rules_.Integer() : rules_.Number();
    return BoundedNumber(min, max, integer);
  }

  StatusOr<Expr> CompileArray(const Json& s, const std::string& path) {
    FERRY_ASSIGN_OR_RETURN(int32_t min, Count(s, "minItems", path, 0));
    FERRY_ASSIGN_OR_RETURN(int32_t max, Count(s, "maxItems", path, -1));
    if (max >= 0 && max < min) return Error(path, "maxItems is below minItems");
    std::vector<Expr> prefix;
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) return Error(path, "prefixItems must be an array");
      for (size_t i = 0; i < s["prefixItems"].size(); ++i) {
        FERRY_ASSIGN_OR_RETURN(
            Expr e, CompileRule(s["prefixItems"][i], path + "/prefixItems/" + std::to_string(i), "item"));
        prefix.push_back(std::move(e));
      }
    }
    std::optional<Expr> items;
    if (!s.contains("items") || s["items"] != Json(false)) {
      FERRY_ASSIGN_OR_RETURN(Expr e, s.contains("items") ? CompileRule(s["items"], path + "/items", "items")
                                                         : rules_.AnyValue());
      items = std::move(e);
    }
    Expr sep = Expr::Seq({rules_.Ws(), Expr::Literal(","), rules_.Ws()});
    // Elements from index i on (nested, so each count parses one way).
    std::function<Expr(int32_t)> from = [&](int32_t i) -> Expr {
      if (max >= 0 && i >= max) return Expr::Empty();
      Expr lead = i == 0 ? Expr::Empty() : sep;
      if (static_cast<size_t>(i) < prefix.size()) {
        Expr e = Expr::Seq({lead, prefix[static_cast<size_t>(i)], from(i + 1)});
        return i >= min ? Expr::Optional(std::move(e)) : e;
      }
      if (!items) return Expr::Empty();
      int32_t need = std::max(0, min - i);
      int32_t room = max < 0 ? -1 : max - i;
      if (i > 0) return Expr::Repeat(Expr::Seq({sep, *items}), need, room);
      Expr e = Expr::Seq(
          {*items, Expr::Repeat(Expr::Seq({sep, *items}), std::max(0, need - 1), room < 0 ? -1 : room - 1)});
      return need == 0 ? Expr::Optional(std::move(e)) : e;
    };
    if (!items && min > static_cast<int32_t>(prefix.size())) return Expr::Class({});
    return Expr::Seq({Expr::Literal("["), rules_.Ws(), from(0), rules_.Ws(), Expr::Literal("]")});
  }

  StatusOr<Expr> CompileObject(const Json& s, const std::string& path) {
    std::vector<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return Error(path, "required must be an array of names");
      for (const Json& r : s["required"]) {
        if (!r.is_string()) return Error(path, "required must be an array of names");
        required.push_back(r.get<std::string>());
      }
    }
    auto is_required = [&](const std::string& n) {
      return std::find(required.begin(), required.end(), n) != required.end();
    };
    struct Prop {
      Expr member;
      bool required;
    };
    std::vector<Prop> props;
    std::set<std::string> declared;
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) return Error(path, "properties must be an object");
      for (const auto& [name, ps] : s["properties"].items()) {
        declared.insert(name);
        if (ps == Json(false)) {
          if (is_required(name)) return Expr::Class({});  // a required property that cannot exist
          continue;
        }
        FERRY_ASSIGN_OR_RETURN(Expr v, CompileRule(ps, path + "/properties/" + name, "prop"));
        props.push_back({rules_.Member(Expr::Literal(Json(name).dump()), std::move(v)), is_required(name)});
      }
    }
    for (const std::string& r : required) {
      if (declared.insert(r).second)
        props.push_back({rules_.Member(Expr::Literal(Json(r).dump()), rules_.AnyValue()), true});
    }
    std::optional<Expr> extra;
    if (!s.contains("additionalProperties") || s["additionalProperties"] != Json(false)) {
      FERRY_ASSIGN_OR_RETURN(
          Expr v, s.contains("additionalProperties")
                      ? CompileRule(s["additionalProperties"], path + "/additionalProperties", "extra")
                      : rules_.AnyValue());
      // Extra keys are those not declared (else "b" could come back as an extra property).
      std::vector<std::u32string> names;
      for (const std::string& d : declared) {
        std::u32string u;
        size_t at = 0;
        uint32_t cp;
        while (at < d.size() && utf8::DecodeCodepoint(d, &at, &cp)) {
          if (cp < 0x20 || cp == '"' || cp == '\\')
            return Error(path,
                         "property name " + Json(d).dump() +
                             " needs a JSON escape; with additionalProperties allowed that is not supported");
          u += static_cast<char32_t>(cp);
        }
        names.push_back(u);
      }
      extra = rules_.Member(names.empty() ? rules_.AnyString() : rules_.StringExcept(names), std::move(v));
    }
    if (props.empty() && extra) return rules_.Container("{", "}", *extra, *extra);

    Expr sep = Expr::Seq({rules_.Ws(), Expr::Literal(","), rules_.Ws()});
    Expr extras = extra ? Expr::Star(Expr::Seq({sep, *extra})) : Expr::Empty();
    // tail[j]: the declared members from j on, each after a comma (optional ones may be
    // skipped), then any extra members.
    size_t n = props.size();
    std::vector<Expr> tail(n + 1);
    tail[n] = extras;
    for (size_t j = n; j-- > 0;) {
      Expr m = Expr::Seq({sep, props[j].member});
      int32_t id = g_.NewRule("members");
      g_.Define(id,
                Expr::Seq({props[j].required ? std::move(m) : Expr::Optional(std::move(m)), tail[j + 1]}));
      tail[j] = Expr::Ref(id);
    }
    // The first member present: a declared one up to the first required, or (nothing
    // required) an extra one or none at all.
    std::vector<Expr> firsts;
    bool any_required = false;
    for (size_t k = 0; k < n; ++k) {
      firsts.push_back(Expr::Seq({props[k].member, tail[k + 1]}));
      if (props[k].required) {
        any_required = true;
        break;
      }
    }
    if (!any_required && extra) firsts.push_back(Expr::Seq({*extra, extras}));
    Expr body = Expr::Seq({Expr::Alt(std::move(firsts)), rules_.Ws()});
    return Expr::Seq({Expr::Literal("{"), rules_.Ws(),
                      any_required ? std::move(body) : Expr::Optional(std::move(body)), Expr::Literal("}")});
  }

  const Json& root_;
  Grammar g_;
  JsonRules rules_;
  std::map<std::string, int32_t> refs_;
  int depth_ = 0;
};

}  // namespace

StatusOr<Grammar> JsonSchemaGrammar(const nlohmann::ordered_json& schema, const JsonGrammarOptions& options) {
  return SchemaCompiler(schema, options).Run();
}

StatusOr<Grammar> JsonSchemaGrammar(std::string_view schema_text, const JsonGrammarOptions& options) {
  Json schema = Json::parse(schema_text, nullptr, false);
  if (schema.is_discarded()) return InvalidArgumentError("JSON schema is not valid JSON");
  return JsonSchemaGrammar(schema, options);
}

Grammar AnyJsonGrammar(bool object_only, const JsonGrammarOptions& options) {
  Grammar g;
  JsonRules rules(g, options);
  int32_t root = g.RuleId("root");
  g.Define(root, object_only ? rules.AnyObject() : rules.AnyValue());
  g.set_root(root);
  return g;
}

}  // namespace ferry::constraint
