// The schema compiler: document -> JsonSchema nodes (json_schema.h). One recursive walk over the
// document, bounded by limits.max_nesting; $ref targets are compiled from a worklist afterwards,
// so references (recursive ones included) never deepen the walk. Then, all iterative: references
// resolved, anyOf flattened to leaf alternatives, first bytes and min_depth computed.
#include "hymoe/server/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace hymoe::server {

using json = nlohmann::ordered_json;
using Kind = JsonSchema::Kind;

namespace {

// Keywords that only annotate: they never constrain the output.
bool is_annotation(std::string_view k) {
  static constexpr std::string_view kAnnotations[] = {
      "title", "description", "$comment", "$schema", "$id", "examples", "default", "deprecated",
      "readOnly", "writeOnly", "format"};
  return std::find(std::begin(kAnnotations), std::end(kAnnotations), k) != std::end(kAnnotations);
}

bool is_known(std::string_view k) {
  static constexpr std::string_view kKnown[] = {
      "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
      "enum", "const", "anyOf", "oneOf", "$ref", "$defs", "definitions"};
  return std::find(std::begin(kKnown), std::end(kKnown), k) != std::end(kKnown);
}

std::string pointer_token(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

std::string compact(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }

// A scalar value's match of a type name ("integer": a number with no fraction).
bool has_type(const json& v, std::string_view type) {
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_boolean();
  if (type == "null") return v.is_null();
  if (type == "number") return v.is_number();
  if (type == "integer") {
    if (v.is_number_integer()) return true;
    if (!v.is_number_float()) return false;
    const double d = v.get<double>();
    return std::isfinite(d) && d == std::floor(d);
  }
  return false;
}

}  // namespace

class JsonSchemaCompiler {
 public:
  JsonSchemaCompiler(const json& doc, const JsonSchemaLimits& limits)
      : doc_(doc), limits_(limits), s_(std::make_shared<JsonSchema>()) {}

  std::shared_ptr<const JsonSchema> run() {
    add_builtins();
    if (!doc_.is_object()) fail_invalid("", "", "the schema must be an object");
    root_ref_ = add_node(Kind::kRef, "");
    const int32_t root = compile(doc_, "", 0);
    s_->nodes_[static_cast<size_t>(root_ref_)].child = root;
    // $ref targets, breadth first: each compiled once, at the nesting of a root-level definition.
    for (size_t i = 0; i < pending_.size(); ++i) {
      const auto [name, ref] = pending_[i];
      s_->nodes_[static_cast<size_t>(ref)].child = compile(*defs_.at(name).value, defs_.at(name).path, 1);
    }
    resolve_refs();
    flatten_any_of();
    compute_first_bytes();
    compute_min_depth();
    int32_t r = s_->root_;
    const JsonSchema::Node& rn = s_->node(r);
    bool object = rn.kind == Kind::kObject;
    if (rn.kind == Kind::kAnyOf) {
      object = true;
      for (uint32_t i = 0; i < rn.count; ++i) object = object && s_->node(s_->alts_[rn.first + i]).kind == Kind::kObject;
    }
    if (rn.kind == Kind::kAny) {
      s_->root_ = r = JsonSchema::kAnyObjectNode;
      object = true;
    }
    if (!object) fail_unsupported("", "type", "the root schema must be an object (type 'object')");
    if (s_->node(r).min_depth > JsonSchema::kMaxDepth) {
      fail_invalid("", "", fmt::format("no value can satisfy the schema within {} nested containers (required "
                                       "properties or minItems nest too deep, or recurse without end)",
                                       JsonSchema::kMaxDepth));
    }
    return s_;
  }

 private:
  struct Def {
    const json* value;
    std::string path;
  };

  [[noreturn]] void fail(std::string path, std::string keyword, std::string what, bool unsupported) {
    std::string where = path.empty() ? "the schema root" : "'" + path + "'";
    std::string msg = keyword.empty() ? fmt::format("{} at {}", what, where)
                                      : fmt::format("'{}' at {}: {}", keyword, where, what);
    throw JsonSchemaError(std::move(msg), std::move(path), std::move(keyword), unsupported);
  }
  [[noreturn]] void fail_invalid(std::string path, std::string keyword, std::string what) {
    fail(std::move(path), std::move(keyword), std::move(what), false);
  }
  [[noreturn]] void fail_unsupported(std::string path, std::string keyword, std::string what) {
    fail(std::move(path), std::move(keyword), std::move(what), true);
  }

  int32_t add_node(Kind kind, const std::string& path) {
    // Frames hold node ids in 16 bits.
    if (static_cast<int64_t>(s_->nodes_.size()) >= std::min<int64_t>(limits_.max_nodes, UINT16_MAX)) {
      fail_unsupported(path, "", fmt::format("the schema compiles to more than {} nodes", limits_.max_nodes));
    }
    JsonSchema::Node n;
    n.kind = kind;
    s_->nodes_.push_back(n);
    paths_.push_back(path);
    return static_cast<int32_t>(s_->nodes_.size() - 1);
  }

  // An enum node over these scalar texts (sorted, duplicates dropped).
  int32_t add_enum(std::vector<std::string> texts, const std::string& path) {
    std::sort(texts.begin(), texts.end());
    texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
    const int32_t id = add_node(Kind::kEnum, path);
    auto& n = s_->nodes_[static_cast<size_t>(id)];
    n.first = static_cast<uint32_t>(s_->literals_.size());
    n.count = static_cast<uint32_t>(texts.size());
    for (auto& t : texts) {
      literal_bytes_ += t.size();
      s_->literals_.push_back(std::move(t));
    }
    check_literal_bytes(path);
    return id;
  }

  void check_literal_bytes(const std::string& path) {
    if (literal_bytes_ > limits_.max_literal_bytes) {
      fail_unsupported(path, "", fmt::format("enum values and property names exceed {} bytes in all",
                                             limits_.max_literal_bytes));
    }
  }

  void add_builtins() {
    add_node(Kind::kAny, "");                          // kAnyNode
    const int32_t obj = add_node(Kind::kObject, "");   // kAnyObjectNode: any keys, any values
    s_->nodes_[static_cast<size_t>(obj)].child = JsonSchema::kAnyNode;
    const int32_t arr = add_node(Kind::kArray, "");    // kAnyArrayNode
    s_->nodes_[static_cast<size_t>(arr)].child = JsonSchema::kAnyNode;
    add_enum({"false", "null", "true"}, "");           // kAnyLiteralNode
  }

  int32_t ref_target(const json& ref, const std::string& path) {
    if (!ref.is_string()) fail_invalid(path, "$ref", "must be a string");
    const std::string r = ref.get<std::string>();
    if (r == "#") return root_ref_;
    std::string container, token;
    if (r.starts_with("#/$defs/")) {
      container = "$defs";
      token = r.substr(8);
    } else if (r.starts_with("#/definitions/")) {
      container = "definitions";
      token = r.substr(14);
    }
    if (container.empty() || token.empty() || token.find('/') != std::string::npos) {
      fail_unsupported(path, "$ref", fmt::format("'{}': only '#', '#/$defs/NAME' and '#/definitions/NAME' are "
                                                 "supported", r));
    }
    const std::string name = container + "/" + token;
    if (auto it = refs_.find(name); it != refs_.end()) return it->second;
    std::string key;  // the token, JSON-pointer unescaped
    for (size_t i = 0; i < token.size(); ++i) {
      if (token[i] == '~' && i + 1 < token.size() && (token[i + 1] == '0' || token[i + 1] == '1')) {
        key += token[i + 1] == '0' ? '~' : '/';
        ++i;
      } else {
        key += token[i];
      }
    }
    auto defs = doc_.find(container);
    if (defs == doc_.end() || !defs->is_object() || !defs->contains(key)) {
      fail_invalid(path, "$ref", fmt::format("'{}' names no definition of the schema root", r));
    }
    const int32_t id = add_node(Kind::kRef, path);
    refs_.emplace(name, id);
    defs_.emplace(name, Def{&defs->at(key), "/" + container + "/" + pointer_token(key)});
    pending_.emplace_back(name, id);
    return id;
  }

  int32_t compile(const json& s, const std::string& path, int32_t nesting) {
    if (nesting > limits_.max_nesting) {
      fail_unsupported(path, "", fmt::format("subschemas nest deeper than {} levels", limits_.max_nesting));
    }
    if (s.is_boolean()) {
      if (s.get<bool>()) return JsonSchema::kAnyNode;
      fail_unsupported(path, "", "the schema 'false' (no value) is not supported");
    }
    if (!s.is_object()) fail_invalid(path, "", fmt::format("a schema must be an object or a boolean, got {}", s.type_name()));
    size_t constraining = 0;
    for (const auto& [k, v] : s.items()) {
      if (is_annotation(k)) continue;
      if (!is_known(k)) {
        fail_unsupported(path, k, "keyword not supported by structured outputs (docs/architecture.md lists the subset)");
      }
      if ((k == "$defs" || k == "definitions")) {
        if (nesting != 0) fail_unsupported(path, k, "definitions are supported at the schema root only");
        if (!v.is_object()) fail_invalid(path, k, "must be an object");
        continue;
      }
      ++constraining;
    }
    if (auto ref = s.find("$ref"); ref != s.end()) {
      if (constraining > 1) fail_unsupported(path, "$ref", "$ref beside other constraining keywords");
      return ref_target(*ref, path + "/$ref");
    }
    const bool any_of = s.contains("anyOf"), one_of = s.contains("oneOf");
    if (any_of || one_of) {
      const char* kw = any_of ? "anyOf" : "oneOf";
      if (constraining > 1) fail_unsupported(path, kw, "anyOf/oneOf beside other constraining keywords");
      const json& alts = s[kw];
      if (!alts.is_array() || alts.empty()) fail_invalid(path, kw, "must be a non-empty array of schemas");
      std::vector<int32_t> ids;
      for (size_t i = 0; i < alts.size(); ++i) {
        ids.push_back(compile(alts[i], fmt::format("{}/{}/{}", path, kw, i), nesting + 1));
      }
      const int32_t id = add_node(Kind::kAnyOf, path + "/" + kw);
      auto& n = s_->nodes_[static_cast<size_t>(id)];
      n.first = static_cast<uint32_t>(s_->alts_.size());
      n.count = static_cast<uint32_t>(ids.size());
      s_->alts_.insert(s_->alts_.end(), ids.begin(), ids.end());
      return id;
    }

    std::vector<std::string> types;
    if (auto t = s.find("type"); t != s.end()) {
      if (t->is_string()) {
        types.push_back(t->get<std::string>());
      } else if (t->is_array() && !t->empty()) {
        for (const auto& e : *t) {
          if (!e.is_string()) fail_invalid(path, "type", "must be a string or an array of strings");
          if (std::find(types.begin(), types.end(), e.get<std::string>()) != types.end()) {
            fail_invalid(path, "type", "names a type twice");
          }
          types.push_back(e.get<std::string>());
        }
      } else {
        fail_invalid(path, "type", "must be a string or a non-empty array of strings");
      }
      for (const auto& t2 : types) {
        static constexpr std::string_view kTypes[] = {"object", "array", "string", "number", "integer", "boolean", "null"};
        if (std::find(std::begin(kTypes), std::end(kTypes), t2) == std::end(kTypes)) {
          fail_invalid(path, "type", fmt::format("unknown type '{}'", t2));
        }
      }
    }

    const bool has_enum = s.contains("enum"), has_const = s.contains("const");
    if (has_enum || has_const) {
      if (has_enum && has_const) fail_unsupported(path, "const", "enum beside const");
      const char* kw = has_enum ? "enum" : "const";
      std::vector<json> values;
      if (has_enum) {
        const json& e = s["enum"];
        if (!e.is_array() || e.empty()) fail_invalid(path, "enum", "must be a non-empty array");
        values.assign(e.begin(), e.end());
      } else {
        values.push_back(s["const"]);
      }
      std::vector<std::string> texts;
      for (const auto& v : values) {
        if (v.is_object() || v.is_array()) fail_unsupported(path, kw, "only scalar values (string, number, boolean, null)");
        if (v.is_number_float() && !std::isfinite(v.get<double>())) fail_invalid(path, kw, "a number out of range");
        bool typed = types.empty();
        for (const auto& t : types) typed = typed || has_type(v, t);
        if (typed) texts.push_back(compact(v));
      }
      if (texts.empty()) fail_invalid(path, kw, "no value has the declared type");
      return add_enum(std::move(texts), path + "/" + kw);
    }

    if (types.empty()) {
      const bool object_kw = s.contains("properties") || s.contains("required") || s.contains("additionalProperties");
      const bool array_kw = s.contains("items") || s.contains("minItems") || s.contains("maxItems");
      if (object_kw && array_kw) fail_unsupported(path, "type", "object and array keywords without a 'type'");
      if (object_kw) types.push_back("object");
      else if (array_kw) types.push_back("array");
      else return JsonSchema::kAnyNode;
    }
    if (types.size() == 1) return compile_typed(s, path, types[0], nesting);
    std::vector<int32_t> ids;
    for (const auto& t : types) ids.push_back(compile_typed(s, path, t, nesting));
    const int32_t id = add_node(Kind::kAnyOf, path + "/type");
    auto& n = s_->nodes_[static_cast<size_t>(id)];
    n.first = static_cast<uint32_t>(s_->alts_.size());
    n.count = static_cast<uint32_t>(ids.size());
    s_->alts_.insert(s_->alts_.end(), ids.begin(), ids.end());
    return id;
  }

  uint32_t read_count(const json& s, const std::string& path, const char* kw, uint32_t fallback) {
    auto it = s.find(kw);
    if (it == s.end()) return fallback;
    if (!it->is_number_unsigned()) {  // nlohmann parses every non-negative integer as unsigned
      fail_invalid(path, kw, "must be a non-negative integer");
    }
    const uint64_t v = it->get<uint64_t>();
    return v > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(v);
  }

  int32_t compile_typed(const json& s, const std::string& path, const std::string& type, int32_t nesting) {
    if (type == "string") return add_node(Kind::kString, path);
    if (type == "number") return add_node(Kind::kNumber, path);
    if (type == "integer") return add_node(Kind::kInteger, path);
    if (type == "boolean") return add_enum({"false", "true"}, path);
    if (type == "null") return add_enum({"null"}, path);
    if (type == "array") {
      int32_t items = JsonSchema::kAnyNode;
      if (auto it = s.find("items"); it != s.end()) {
        if (it->is_array()) fail_unsupported(path, "items", "tuple items (an array of schemas)");
        items = compile(*it, path + "/items", nesting + 1);
      }
      const uint32_t min_items = read_count(s, path, "minItems", 0);
      uint32_t max_items = read_count(s, path, "maxItems", UINT32_MAX);
      if (min_items > static_cast<uint32_t>(limits_.max_items_bound)) {
        fail_unsupported(path, "minItems", fmt::format("at most {}", limits_.max_items_bound));
      }
      if (min_items > max_items) fail_invalid(path, "minItems", "is larger than maxItems");
      if (max_items > UINT16_MAX) max_items = UINT32_MAX;
      const int32_t id = add_node(Kind::kArray, path);
      auto& n = s_->nodes_[static_cast<size_t>(id)];
      n.child = items;
      n.min_items = min_items;
      n.max_items = max_items;
      return id;
    }
    // object
    const json empty = json::object();
    const json* props = &empty;
    if (auto it = s.find("properties"); it != s.end()) {
      if (!it->is_object()) fail_invalid(path, "properties", "must be an object");
      props = &*it;
    }
    if (static_cast<int64_t>(props->size()) > limits_.max_properties) {
      fail_unsupported(path, "properties", fmt::format("more than {} properties in one object", limits_.max_properties));
    }
    std::vector<std::string> required;
    if (auto it = s.find("required"); it != s.end()) {
      if (!it->is_array()) fail_invalid(path, "required", "must be an array of strings");
      for (const auto& r : *it) {
        if (!r.is_string()) fail_invalid(path, "required", "must be an array of strings");
        if (!props->contains(r.get<std::string>())) {
          fail_unsupported(path, "required", fmt::format("'{}' is not in 'properties'", r.get<std::string>()));
        }
        required.push_back(r.get<std::string>());
      }
    }
    int32_t map_value = -1;
    if (auto it = s.find("additionalProperties"); it != s.end()) {
      if (it->is_object()) {
        if (!props->empty()) fail_unsupported(path, "additionalProperties", "a schema beside 'properties'");
        map_value = compile(*it, path + "/additionalProperties", nesting + 1);
      } else if (!it->is_boolean()) {
        fail_invalid(path, "additionalProperties", "must be a boolean or a schema");
      } else if (it->get<bool>() && props->empty()) {
        map_value = JsonSchema::kAnyNode;
      }
    } else if (props->empty()) {
      map_value = JsonSchema::kAnyNode;
    }
    std::vector<JsonSchema::Property> list;
    uint16_t required_end = 0;
    for (const auto& [key, sub] : props->items()) {
      const bool req = std::find(required.begin(), required.end(), key) != required.end();
      const int32_t node = compile(sub, path + "/properties/" + pointer_token(key), nesting + 1);
      std::string text = compact(json(key));
      literal_bytes_ += text.size();
      list.push_back({std::move(text), node, req});
      if (req) required_end = static_cast<uint16_t>(list.size());
    }
    check_literal_bytes(path);
    const int32_t id = add_node(Kind::kObject, path);
    auto& n = s_->nodes_[static_cast<size_t>(id)];
    n.child = map_value;
    n.required_end = required_end;
    n.first = static_cast<uint32_t>(s_->props_.size());
    n.count = static_cast<uint32_t>(list.size());
    for (auto& p : list) s_->props_.push_back(std::move(p));
    return id;
  }

  // Every reference to a kRef node goes to what it stands for.
  void resolve_refs() {
    const size_t n = s_->nodes_.size();
    auto resolve = [&](int32_t id) {
      for (size_t steps = 0; id >= 0 && s_->nodes_[static_cast<size_t>(id)].kind == Kind::kRef; ++steps) {
        if (steps > n) fail_invalid(paths_[static_cast<size_t>(id)], "$ref", "refers only to itself");
        id = s_->nodes_[static_cast<size_t>(id)].child;
      }
      return id;
    };
    for (auto& node : s_->nodes_) {
      if (node.kind != Kind::kRef) node.child = resolve(node.child);
    }
    for (auto& p : s_->props_) p.node = resolve(p.node);
    for (auto& a : s_->alts_) a = resolve(a);
    s_->root_ = resolve(root_ref_);
  }

  // Each anyOf's alternatives become its leaves (no anyOf among them; an anyOf reached again is
  // skipped), its enum leaves merged into one; then no two leaves may start with the same byte.
  void flatten_any_of() {
    const size_t n = s_->nodes_.size();
    std::vector<std::vector<int32_t>> leaves(n);
    std::vector<uint8_t> seen(n);
    for (size_t id = 0; id < n; ++id) {
      if (s_->nodes_[id].kind != Kind::kAnyOf) continue;
      std::fill(seen.begin(), seen.end(), 0);
      std::vector<int32_t> stack{static_cast<int32_t>(id)};
      seen[id] = 1;
      while (!stack.empty()) {
        const JsonSchema::Node& a = s_->nodes_[static_cast<size_t>(stack.back())];
        stack.pop_back();
        for (uint32_t i = a.count; i-- > 0;) {
          const int32_t alt = s_->alts_[a.first + i];
          if (seen[static_cast<size_t>(alt)]) continue;
          seen[static_cast<size_t>(alt)] = 1;
          if (s_->nodes_[static_cast<size_t>(alt)].kind == Kind::kAnyOf) stack.push_back(alt);
          else leaves[id].push_back(alt);
        }
      }
    }
    std::vector<int32_t> alts;
    for (size_t id = 0; id < n; ++id) {
      if (s_->nodes_[id].kind != Kind::kAnyOf) continue;
      std::vector<int32_t> list, enums;
      for (int32_t leaf : leaves[id]) {
        (s_->nodes_[static_cast<size_t>(leaf)].kind == Kind::kEnum ? enums : list).push_back(leaf);
      }
      if (enums.size() > 1) {
        std::vector<std::string> texts;
        for (int32_t e : enums) {
          const auto& en = s_->nodes_[static_cast<size_t>(e)];
          for (uint32_t i = 0; i < en.count; ++i) texts.push_back(s_->literals_[en.first + i]);
        }
        list.push_back(add_enum(std::move(texts), paths_[id]));
      } else if (enums.size() == 1) {
        list.push_back(enums[0]);
      }
      if (list.empty()) fail_invalid(paths_[id], "", "anyOf has no alternative other than itself");
      auto& node = s_->nodes_[id];
      node.first = static_cast<uint32_t>(alts.size());
      node.count = static_cast<uint32_t>(list.size());
      alts.insert(alts.end(), list.begin(), list.end());
    }
    s_->alts_ = std::move(alts);
  }

  void compute_first_bytes() {
    std::bitset<256> number;
    number.set('-');
    for (int c = '0'; c <= '9'; ++c) number.set(static_cast<size_t>(c));
    for (auto& node : s_->nodes_) {
      std::bitset<256> f;
      switch (node.kind) {
        case Kind::kAny: f = number; for (char c : std::string_view("{[\"tfn")) f.set(static_cast<uint8_t>(c)); break;
        case Kind::kObject: f.set('{'); break;
        case Kind::kArray: f.set('['); break;
        case Kind::kString: f.set('"'); break;
        case Kind::kNumber: case Kind::kInteger: f = number; break;
        case Kind::kEnum:
          for (uint32_t i = 0; i < node.count; ++i) f.set(static_cast<uint8_t>(s_->literals_[node.first + i][0]));
          break;
        case Kind::kAnyOf: case Kind::kRef: break;
      }
      node.first_bytes = f;
    }
    for (size_t id = 0; id < s_->nodes_.size(); ++id) {
      auto& node = s_->nodes_[id];
      if (node.kind != Kind::kAnyOf) continue;
      std::bitset<256> all;
      for (uint32_t i = 0; i < node.count; ++i) {
        const auto& leaf = s_->nodes_[static_cast<size_t>(s_->alts_[node.first + i])];
        const auto both = all & leaf.first_bytes;
        if (both.any()) {
          size_t b = 0;
          while (!both.test(b)) ++b;
          fail_unsupported(paths_[id], "", fmt::format("alternatives that can start with the same byte ('{}'): "
                                                       "anyOf/oneOf/type lists must differ in JSON type (enum and "
                                                       "const alternatives are merged)", static_cast<char>(b)));
        }
        all |= leaf.first_bytes;
      }
      node.first_bytes = all;
    }
  }

  // The least fixpoint of min_depth over the node graph (values only fall, from kUnreachable).
  void compute_min_depth() {
    constexpr uint8_t kU = JsonSchema::kUnreachable;
    auto& nodes = s_->nodes_;
    for (auto& node : nodes) node.min_depth = kU;
    auto md = [&](int32_t id) -> uint32_t { return nodes[static_cast<size_t>(id)].min_depth; };
    for (bool changed = true; changed;) {
      changed = false;
      for (auto& node : nodes) {
        uint32_t v = kU;
        switch (node.kind) {
          case Kind::kAny: case Kind::kString: case Kind::kNumber: case Kind::kInteger: case Kind::kEnum: v = 0; break;
          case Kind::kObject:
            v = 1;
            for (uint32_t i = 0; i < node.count; ++i) {
              if (s_->props_[node.first + i].required) v = std::max(v, 1 + md(s_->props_[node.first + i].node));
            }
            break;
          case Kind::kArray: v = 1 + (node.min_items > 0 ? md(node.child) : 0); break;
          case Kind::kAnyOf:
            for (uint32_t i = 0; i < node.count; ++i) v = std::min(v, md(s_->alts_[node.first + i]));
            break;
          case Kind::kRef: break;
        }
        v = std::min<uint32_t>(v, kU);
        if (v < node.min_depth) {
          node.min_depth = static_cast<uint8_t>(v);
          changed = true;
        }
      }
    }
  }

  const json& doc_;
  JsonSchemaLimits limits_;
  std::shared_ptr<JsonSchema> s_;
  std::vector<std::string> paths_;  // per node: where in the document it comes from
  int32_t root_ref_ = -1;
  std::map<std::string, int32_t> refs_;              // "$defs/NAME" -> its kRef node
  std::map<std::string, Def> defs_;
  std::vector<std::pair<std::string, int32_t>> pending_;
  size_t literal_bytes_ = 0;
};

std::shared_ptr<const JsonSchema> compile_json_schema(const json& schema, const JsonSchemaLimits& limits) {
  return JsonSchemaCompiler(schema, limits).run();
}

}  // namespace hymoe::server
