#include "json_validator.h"

#include <cmath>

namespace ferry::constraint::testing {

size_t CodepointCount(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

namespace {

bool Digits(const std::string& s, size_t at, size_t n) {
  if (at + n > s.size()) return false;
  for (size_t i = at; i < at + n; ++i)
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}
int Num(const std::string& s, size_t at, size_t n) {
  return std::stoi(s.substr(at, n));
}

bool ValidDate(const std::string& s) {
  return s.size() == 10 && Digits(s, 0, 4) && s[4] == '-' && Digits(s, 5, 2) && s[7] == '-' &&
         Digits(s, 8, 2) && Num(s, 5, 2) >= 1 && Num(s, 5, 2) <= 12 && Num(s, 8, 2) >= 1 &&
         Num(s, 8, 2) <= 31;
}

bool ValidTime(const std::string& s) {
  if (s.size() < 9 || !Digits(s, 0, 2) || s[2] != ':' || !Digits(s, 3, 2) || s[5] != ':' || !Digits(s, 6, 2))
    return false;
  if (Num(s, 0, 2) > 23 || Num(s, 3, 2) > 59 || Num(s, 6, 2) > 59) return false;
  size_t i = 8;
  if (i < s.size() && s[i] == '.') {
    size_t j = i + 1;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
    if (j == i + 1) return false;
    i = j;
  }
  if (i < s.size() && s[i] == 'Z') return i + 1 == s.size();
  if (i < s.size() && (s[i] == '+' || s[i] == '-'))
    return s.size() == i + 6 && Digits(s, i + 1, 2) && s[i + 3] == ':' && Digits(s, i + 4, 2) &&
           Num(s, i + 1, 2) <= 23 && Num(s, i + 4, 2) <= 59;
  return false;
}

bool EmailPart(const std::string& s, bool domain_label) {
  if (s.empty()) return false;
  for (char c : s) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '-' ||
              (!domain_label && (c == '_' || c == '%' || c == '+'));
    if (!ok) return false;
  }
  return !domain_label || (s.front() != '-' && s.back() != '-');
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == sep)
      out.emplace_back();
    else
      out.back() += c;
  }
  return out;
}

bool ValidEmail(const std::string& s) {
  auto at = s.find('@');
  if (at == std::string::npos || s.find('@', at + 1) != std::string::npos) return false;
  for (const auto& p : Split(s.substr(0, at), '.'))
    if (!EmailPart(p, false)) return false;
  auto labels = Split(s.substr(at + 1), '.');
  if (labels.size() < 2) return false;
  for (const auto& p : labels)
    if (!EmailPart(p, true)) return false;
  return true;
}

const Json& Resolve(const Json& root, const std::string& ref) {
  return ref == "#" ? root : root.at(Json::json_pointer(ref.substr(1)));
}

bool TypeIs(const Json& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "integer") return v.is_number_integer();
  if (t == "number") return v.is_number();
  if (t == "string") return v.is_string();
  if (t == "array") return v.is_array();
  if (t == "object") return v.is_object();
  return false;
}

}  // namespace

bool ValidFormat(const std::string& f, const std::string& s) {
  if (f == "date") return ValidDate(s);
  if (f == "time") return ValidTime(s);
  if (f == "date-time") {
    auto t = s.find('T');
    return t == 10 && ValidDate(s.substr(0, 10)) && ValidTime(s.substr(11));
  }
  if (f == "uuid") {
    if (s.size() != 36) return false;
    for (size_t i = 0; i < 36; ++i) {
      bool dash = i == 8 || i == 13 || i == 18 || i == 23;
      if (dash ? s[i] != '-' : !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
    }
    return true;
  }
  if (f == "email") return ValidEmail(s);
  return false;
}

bool Validate(const Json& s, const Json& v, const Json& root) {
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref")) return Validate(Resolve(root, s["$ref"]), v, root);
  if (s.contains("const") && v != s["const"]) return false;
  if (s.contains("enum")) {
    bool any = false;
    for (const Json& e : s["enum"]) any |= e == v;
    if (!any) return false;
  }
  if (s.contains("anyOf")) {
    bool any = false;
    for (const Json& x : s["anyOf"]) any |= Validate(x, v, root);
    if (!any) return false;
  }
  if (s.contains("oneOf")) {
    int n = 0;
    for (const Json& x : s["oneOf"]) n += Validate(x, v, root);
    if (n != 1) return false;
  }
  if (s.contains("allOf"))
    for (const Json& x : s["allOf"])
      if (!Validate(x, v, root)) return false;
  if (s.contains("type")) {
    bool ok = false;
    if (s["type"].is_string()) {
      ok = TypeIs(v, s["type"]);
    } else {
      for (const Json& t : s["type"]) ok |= TypeIs(v, t);
    }
    if (!ok) return false;
  }
  if (v.is_string()) {
    const std::string str = v.get<std::string>();
    size_t n = CodepointCount(str);
    if (s.contains("minLength") && n < s["minLength"].get<size_t>()) return false;
    if (s.contains("maxLength") && n > s["maxLength"].get<size_t>()) return false;
    if (s.contains("pattern") &&
        !std::regex_search(str, std::regex(s["pattern"].get<std::string>(), std::regex::ECMAScript)))
      return false;
    if (s.contains("format") && !ValidFormat(s["format"], str)) return false;
  }
  if (v.is_number()) {
    double x = v.get<double>();
    if (s.contains("minimum") && x < s["minimum"].get<double>()) return false;
    if (s.contains("maximum") && x > s["maximum"].get<double>()) return false;
    if (s.contains("exclusiveMinimum") && x <= s["exclusiveMinimum"].get<double>()) return false;
    if (s.contains("exclusiveMaximum") && x >= s["exclusiveMaximum"].get<double>()) return false;
  }
  if (v.is_array()) {
    size_t n = v.size();
    if (s.contains("minItems") && n < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && n > s["maxItems"].get<size_t>()) return false;
    size_t prefix = s.contains("prefixItems") ? s["prefixItems"].size() : 0;
    for (size_t i = 0; i < n; ++i) {
      if (i < prefix) {
        if (!Validate(s["prefixItems"][i], v[i], root)) return false;
      } else if (s.contains("items") && !Validate(s["items"], v[i], root)) {
        return false;
      }
    }
  }
  if (v.is_object()) {
    if (s.contains("required"))
      for (const Json& r : s["required"])
        if (!v.contains(r.get<std::string>())) return false;
    for (const auto& [k, x] : v.items()) {
      if (s.contains("properties") && s["properties"].contains(k)) {
        if (!Validate(s["properties"][k], x, root)) return false;
      } else if (s.contains("additionalProperties") && !Validate(s["additionalProperties"], x, root)) {
        return false;
      }
    }
  }
  return true;
}

std::string InstanceGenerator::RandomString(int len) {
  static const std::vector<std::string> pieces = {"a", "b", "Z", "0",  "7",  " ",  "-",  ".",
                                                  "@", ":", "é", "日", "\"", "\\", "\n", "T"};
  std::string s;
  for (int i = 0; i < len; ++i)
    s += pieces[static_cast<size_t>(Uniform(0, static_cast<int>(pieces.size()) - 1))];
  return s;
}

Json InstanceGenerator::RandomValue(int depth) {
  switch (Uniform(0, depth > 2 ? 4 : 6)) {
    case 0:
      return nullptr;
    case 1:
      return Chance(0.5);
    case 2:
      return Uniform(-20, 20);
    case 3:
      return Uniform(-40, 40) / 4.0;
    case 4:
      return RandomString(Uniform(0, 4));
    case 5: {
      Json a = Json::array();
      for (int i = Uniform(0, 3); i > 0; --i) a.push_back(RandomValue(depth + 1));
      return a;
    }
    default: {
      Json o = Json::object();
      for (int i = Uniform(0, 2); i > 0; --i) {
        std::string key(1, 'k');
        key += std::to_string(i);
        o[key] = RandomValue(depth + 1);
      }
      return o;
    }
  }
}

Json InstanceGenerator::Generate(const Json& s, int depth) {
  if (Chance(0.08) || depth > 5) return RandomValue(depth);
  if (s.is_boolean()) return RandomValue(depth);
  if (s.contains("$ref")) return Generate(Resolve(root_, s["$ref"]), depth + 1);
  if (s.contains("const")) return Chance(0.8) ? s["const"] : RandomValue(depth);
  if (s.contains("enum"))
    return Chance(0.8) ? s["enum"][static_cast<size_t>(Uniform(0, static_cast<int>(s["enum"].size()) - 1))]
                       : RandomValue(depth);
  for (const char* k : {"anyOf", "oneOf"})
    if (s.contains(k))
      return Generate(s[k][static_cast<size_t>(Uniform(0, static_cast<int>(s[k].size()) - 1))], depth + 1);
  if (s.contains("allOf")) {
    // Declared properties in the order the parts declare them, then any others.
    Json merged = Json::object(), ordered = Json::object();
    std::vector<std::string> order;
    for (const Json& part : s["allOf"]) {
      const Json& p = part.contains("$ref") ? Resolve(root_, part["$ref"]) : part;
      if (p.contains("properties"))
        for (const auto& [k, v] : p["properties"].items()) order.push_back(k);
      Json g = Generate(p, depth + 1);
      if (g.is_object())
        for (const auto& [k, v] : g.items()) merged[k] = v;
    }
    for (const auto& k : order)
      if (merged.contains(k) && !ordered.contains(k)) ordered[k] = merged[k];
    for (const auto& [k, v] : merged.items())
      if (!ordered.contains(k)) ordered[k] = v;
    return ordered;
  }
  std::string type = "any";
  if (s.contains("type"))
    type = s["type"].is_string()
               ? s["type"].get<std::string>()
               : s["type"][static_cast<size_t>(Uniform(0, static_cast<int>(s["type"].size()) - 1))]
                     .get<std::string>();
  return GenerateType(s, type, depth);
}

Json InstanceGenerator::GenerateType(const Json& s, const std::string& type, int depth) {
  if (type == "null") return nullptr;
  if (type == "boolean") return Chance(0.5);
  if (type == "integer" || type == "number") {
    int lo = -30, hi = 30;
    for (const char* k : {"minimum", "exclusiveMinimum"})
      if (s.contains(k)) lo = static_cast<int>(std::floor(s[k].get<double>())) - 3;
    for (const char* k : {"maximum", "exclusiveMaximum"})
      if (s.contains(k)) hi = static_cast<int>(std::ceil(s[k].get<double>())) + 3;
    if (type == "integer" || Chance(0.3)) return Uniform(lo, hi);
    return Uniform(lo * 4, hi * 4) / 4.0;
  }
  if (type == "string") {
    if (s.contains("format")) {
      static const std::vector<std::string> samples = {"2024-02-29",
                                                       "2024-13-01",
                                                       "1999-12-31",
                                                       "12:30:00Z",
                                                       "23:59:59.5+02:00",
                                                       "24:00:00Z",
                                                       "12:30:00",
                                                       "2024-01-01T10:00:00Z",
                                                       "2024-01-01 10:00:00Z",
                                                       "123e4567-e89b-12d3-a456-426614174000",
                                                       "123e4567-e89b-12d3-a456-42661417400",
                                                       "a.b@example.com",
                                                       "a@b",
                                                       "x_y+z@sub-1.example.org",
                                                       "@x.com",
                                                       "a@-b.com"};
      return samples[static_cast<size_t>(Uniform(0, static_cast<int>(samples.size()) - 1))];
    }
    int lo = s.contains("minLength") ? s["minLength"].get<int>() : 0;
    int hi = s.contains("maxLength") ? s["maxLength"].get<int>() : lo + 5;
    std::string str = RandomString(Uniform(std::max(0, lo - 1), hi + 1));
    if (s.contains("pattern") && Chance(0.5)) str.insert(0, "ab");
    return str;
  }
  if (type == "array") {
    int lo = s.contains("minItems") ? s["minItems"].get<int>() : 0;
    int hi = s.contains("maxItems") ? s["maxItems"].get<int>() : lo + 3;
    Json a = Json::array();
    size_t prefix = s.contains("prefixItems") ? s["prefixItems"].size() : 0;
    for (int i = 0, n = Uniform(std::max(0, lo - 1), hi + 1); i < n; ++i) {
      if (static_cast<size_t>(i) < prefix)
        a.push_back(Generate(s["prefixItems"][static_cast<size_t>(i)], depth + 1));
      else
        a.push_back(s.contains("items") ? Generate(s["items"], depth + 1) : RandomValue(depth + 1));
    }
    return a;
  }
  if (type == "object") {
    Json o = Json::object();
    auto required = [&](const std::string& k) {
      if (!s.contains("required")) return false;
      for (const Json& r : s["required"])
        if (r == k) return true;
      return false;
    };
    if (s.contains("properties"))
      for (const auto& [k, ps] : s["properties"].items())
        if (Chance(required(k) ? 0.95 : 0.6)) o[k] = Generate(ps, depth + 1);
    if (Chance(0.2)) {
      const Json& extra = s.contains("additionalProperties") ? s["additionalProperties"] : Json(true);
      o["zz_extra"] = Generate(extra, depth + 1);
    }
    return o;
  }
  return RandomValue(depth);
}

}  // namespace ferry::constraint::testing
