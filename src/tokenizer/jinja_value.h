// Values of the Jinja-subset interpreter (jinja.h): Python-like semantics for what chat
// templates touch: None/Undefined, bool, int, float, str, list, dict (insertion-ordered),
// namespace and macros. Lists, dicts and namespaces are shared by reference, as in Python.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace hymoe::tokenizer::jinja {

struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;
struct MacroDef;

struct Value {
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kMacro };
  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;
  bool is_namespace = false;  // a dict created by namespace(): attributes assignable
  const MacroDef* macro = nullptr;

  static Value none() { return make(Kind::kNone); }
  static Value boolean(bool v) { Value x = make(Kind::kBool); x.b = v; return x; }
  static Value integer(int64_t v) { Value x = make(Kind::kInt); x.i = v; return x; }
  static Value number(double v) { Value x = make(Kind::kFloat); x.f = v; return x; }
  static Value string(std::string v) { Value x = make(Kind::kString); x.s = std::move(v); return x; }
  static Value new_list() { Value x = make(Kind::kList); x.list = std::make_shared<List>(); return x; }
  static Value new_dict() { Value x = make(Kind::kDict); x.dict = std::make_shared<Dict>(); return x; }
  // Arrays and objects nested deeper than kMaxJsonDepth throw kInvalidArgument (the conversion
  // and everything that later walks the value recurse once per level).
  static constexpr int kMaxJsonDepth = 256;
  static Value from_json(const nlohmann::ordered_json& j);

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_none() const { return kind == Kind::kNone; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat; }
  double as_double() const { return kind == Kind::kInt ? double(i) : f; }

  // Python truthiness.
  bool truthy() const;
  // Python str() (what {{ }} prints); Undefined prints as "".
  std::string str() const;
  // json.dumps(x, ...) with the options of transformers' tojson filter (JsonStyle).
  std::string to_json(const struct JsonStyle& style) const;
  // json.dumps(x, ensure_ascii=False, indent=indent); indent < 0 for none.
  std::string to_json(int indent) const;
  // Dict lookup; nullptr when absent or not a dict.
  const Value* get(std::string_view key) const;
  void set(const std::string& key, Value v);

 private:
  static Value make(Kind k) { Value x; x.kind = k; return x; }
  static Value from_json(const nlohmann::ordered_json& j, int depth);
};

// The arguments of json.dumps that transformers' tojson filter passes on:
// tojson(ensure_ascii=False, indent=None, separators=None, sort_keys=False).
struct JsonStyle {
  bool ensure_ascii = false;           // non-ASCII as \uXXXX (surrogate pairs past U+FFFF)
  std::optional<std::string> indent;   // per level; set: one item per line
  std::optional<std::string> item_sep, key_sep;  // separators; default ", " / ": " (",": with indent)
  bool sort_keys = false;
};

bool operator==(const Value& a, const Value& b);
std::string_view kind_name(const Value& v);

}  // namespace hymoe::tokenizer::jinja
