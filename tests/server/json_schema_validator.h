// A plain validator of the JSON Schema subset that structured outputs support (json_schema.h):
// the oracle of the schema tests and the fuzz target, written apart from the compiler. Recursion
// is bounded (depth 64); $ref is "#" or "#/$defs/NAME" / "#/definitions/NAME".
#pragma once

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

namespace hymoe::server::testing_schema {

using json = nlohmann::ordered_json;

inline const json& resolve(const json& s, const json& root) {
  if (!s.is_object() || !s.contains("$ref")) return s;
  const std::string r = s["$ref"].get<std::string>();
  if (r == "#") return root;
  const auto slash = r.find('/', 2);
  std::string key;
  for (size_t i = slash + 1; i < r.size(); ++i) {
    if (r[i] == '~' && i + 1 < r.size() && (r[i + 1] == '0' || r[i + 1] == '1')) key += r[++i] == '0' ? '~' : '/';
    else key += r[i];
  }
  return root.at(r.substr(2, slash - 2)).at(key);
}

inline bool has_type(const json& v, const std::string& t) {
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "number") return v.is_number();
  if (t == "integer") return v.is_number_integer() || (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()));
  return false;
}

// One step of validate(); budget counts calls (a schema such as A = anyOf[A, A, ...] would take
// exponential time), and runs out to "not valid" with budget < 0.
inline bool validate_at(const json& v, const json& schema_in, const json& root, int depth, long& budget) {
  if (depth > 64 || --budget < 0) return false;
  const json& s = resolve(schema_in, root);
  if (s.is_boolean()) return s.get<bool>();
  for (const char* kw : {"anyOf", "oneOf"}) {
    if (s.contains(kw)) {
      int n = 0;
      for (const auto& alt : s[kw]) n += validate_at(v, alt, root, depth + 1, budget);
      if (std::string(kw) == "anyOf" ? n == 0 : n != 1) return false;
    }
  }
  if (s.contains("enum")) {
    bool any = false;
    for (const auto& e : s["enum"]) any = any || e == v;
    if (!any) return false;
  }
  if (s.contains("const") && !(s["const"] == v)) return false;
  if (s.contains("type")) {
    bool ok = false;
    if (s["type"].is_string()) ok = has_type(v, s["type"].get<std::string>());
    else for (const auto& t : s["type"]) ok = ok || has_type(v, t.get<std::string>());
    if (!ok) return false;
  }
  if (v.is_object()) {
    const json props = s.value("properties", json::object());
    for (const auto& r : s.value("required", json::array())) {
      if (!v.contains(r.get<std::string>())) return false;
    }
    for (const auto& [k, val] : v.items()) {
      if (props.contains(k)) {
        if (!validate_at(val, props[k], root, depth + 1, budget)) return false;
      } else if (s.contains("additionalProperties")) {
        if (!validate_at(val, s["additionalProperties"], root, depth + 1, budget)) return false;
      }
    }
  }
  if (v.is_array()) {
    if (s.contains("minItems") && v.size() < s["minItems"].get<size_t>()) return false;
    if (s.contains("maxItems") && v.size() > s["maxItems"].get<size_t>()) return false;
    if (s.contains("items")) {
      for (const auto& e : v) {
        if (!validate_at(e, s["items"], root, depth + 1, budget)) return false;
      }
    }
  }
  return true;
}

// Whether v conforms to schema (root: the document its $refs point into). undecided: the budget
// of calls ran out (then the answer is false).
inline bool validate(const json& v, const json& schema, const json& root, bool* undecided = nullptr) {
  long budget = 1000000;
  const bool ok = validate_at(v, schema, root, 0, budget);
  if (undecided) *undecided = budget < 0;
  return ok;
}

}  // namespace hymoe::server::testing_schema
