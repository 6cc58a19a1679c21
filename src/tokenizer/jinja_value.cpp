#include "jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "hymoe/common/error.h"

namespace hymoe::tokenizer::jinja {

Value Value::from_json(const nlohmann::ordered_json& j) { return from_json(j, 0); }

Value Value::from_json(const nlohmann::ordered_json& j, int depth) {
  if (j.is_structured()) {
    HYMOE_CHECK(depth < kMaxJsonDepth, kInvalidArgument,
                "chat template: a value is nested deeper than {} levels of arrays and objects", kMaxJsonDepth);
  }
  switch (j.type()) {
    case nlohmann::json::value_t::null: return none();
    case nlohmann::json::value_t::boolean: return boolean(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return integer(j.get<int64_t>());
    case nlohmann::json::value_t::number_float: return number(j.get<double>());
    case nlohmann::json::value_t::string: return string(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      Value v = new_list();
      for (const auto& x : j) v.list->push_back(from_json(x, depth + 1));
      return v;
    }
    case nlohmann::json::value_t::object: {
      Value v = new_dict();
      for (auto it = j.begin(); it != j.end(); ++it) v.dict->emplace_back(it.key(), from_json(it.value(), depth + 1));
      return v;
    }
    default: return Value();
  }
}

bool Value::truthy() const {
  switch (kind) {
    case Kind::kUndefined: case Kind::kNone: return false;
    case Kind::kBool: return b;
    case Kind::kInt: return i != 0;
    case Kind::kFloat: return f != 0;
    case Kind::kString: return !s.empty();
    case Kind::kList: return !list->empty();
    case Kind::kDict: return is_namespace || !dict->empty();
    case Kind::kMacro: return true;
  }
  return false;
}

namespace {

std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f);
  std::string s(buf, end);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

// A JSON string as Python's json.dumps writes it; ensure_ascii escapes every non-ASCII
// character (the text is valid UTF-8: it came from JSON or the template).
void json_string(std::string& out, const std::string& s, bool ensure_ascii = false) {
  out.push_back('"');
  auto u_escape = [&out](uint32_t unit) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "\\u%04x", unit);
    out += buf;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          u_escape(c);
        } else if (c >= 0x80 && ensure_ascii) {
          const size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
          uint32_t cp = c & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
          for (size_t k = 1; k < len && i + k < s.size(); ++k) cp = (cp << 6) | (s[i + k] & 0x3F);
          i += len - 1;
          if (cp >= 0x10000) {
            cp -= 0x10000;
            u_escape(0xD800 + (cp >> 10));
            u_escape(0xDC00 + (cp & 0x3FF));
          } else {
            u_escape(cp);
          }
        } else {
          out.push_back(char(c));
        }
    }
  }
  out.push_back('"');
}

// Python's repr of a str, as str() of a list shows its items.
std::string py_repr_string(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    if (c == q || c == '\\') out.push_back('\\');
    if (c == '\n') { out += "\\n"; continue; }
    if (c == '\t') { out += "\\t"; continue; }
    if (c == '\r') { out += "\\r"; continue; }
    out.push_back(c);
  }
  out.push_back(q);
  return out;
}

std::string py_repr(const Value& v) {
  return v.kind == Value::Kind::kString ? py_repr_string(v.s) : v.str();
}

void to_json_rec(const Value& v, const JsonStyle& st, int depth, std::string& out) {
  auto newline = [&](int level) {
    if (!st.indent) return;
    out.push_back('\n');
    for (int k = 0; k < level; ++k) out += *st.indent;
  };
  const std::string& item_sep = st.item_sep ? *st.item_sep : st.indent ? std::string(",") : std::string(", ");
  const std::string key_sep = st.key_sep ? *st.key_sep : ": ";
  switch (v.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += v.b ? "true" : "false"; return;
    case Value::Kind::kInt: out += std::to_string(v.i); return;
    case Value::Kind::kFloat: {
      const std::string r = float_repr(v.f);
      out += r == "nan" ? "NaN" : r == "inf" ? "Infinity" : r == "-inf" ? "-Infinity" : r;
      return;
    }
    case Value::Kind::kString: json_string(out, v.s, st.ensure_ascii); return;
    case Value::Kind::kList: {
      if (v.list->empty()) { out += "[]"; return; }
      out += "[";
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += item_sep;
        newline(depth + 1);
        to_json_rec((*v.list)[k], st, depth + 1, out);
      }
      newline(depth);
      out += "]";
      return;
    }
    case Value::Kind::kDict: {
      if (v.dict->empty()) { out += "{}"; return; }
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : *v.dict) items.push_back(&kv);
      // Python sorts str keys by code point, which is UTF-8 byte order.
      if (st.sort_keys) std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out += "{";
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) out += item_sep;
        newline(depth + 1);
        json_string(out, items[k]->first, st.ensure_ascii);
        out += key_sep;
        to_json_rec(items[k]->second, st, depth + 1, out);
      }
      newline(depth);
      out += "}";
      return;
    }
    case Value::Kind::kMacro:
      HYMOE_THROW(kInvalidArgument, "chat template: a macro cannot be converted to JSON");
  }
}

}  // namespace

std::string Value::str() const {
  switch (kind) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return b ? "True" : "False";
    case Kind::kInt: return std::to_string(i);
    case Kind::kFloat: return float_repr(f);
    case Kind::kString: return s;
    case Kind::kList: {
      std::string out = "[";
      for (size_t k = 0; k < list->size(); ++k) out += (k ? ", " : "") + py_repr((*list)[k]);
      return out + "]";
    }
    case Kind::kDict: {
      std::string out = "{";
      for (size_t k = 0; k < dict->size(); ++k) {
        out += (k ? ", " : "") + py_repr_string((*dict)[k].first) + ": " + py_repr((*dict)[k].second);
      }
      return out + "}";
    }
    case Kind::kMacro: return "<macro>";
  }
  return "";
}

std::string Value::to_json(const JsonStyle& style) const {
  std::string out;
  to_json_rec(*this, style, 0, out);
  return out;
}

std::string Value::to_json(int indent) const {
  JsonStyle st;
  if (indent >= 0) st.indent = std::string(size_t(indent), ' ');
  return to_json(st);
}

const Value* Value::get(std::string_view key) const {
  if (kind != Kind::kDict) return nullptr;
  for (const auto& [k, v] : *dict) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Value::set(const std::string& key, Value v) {
  for (auto& [k, x] : *dict) {
    if (k == key) {
      x = std::move(v);
      return;
    }
  }
  dict->emplace_back(key, std::move(v));
}

bool operator==(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.as_double() == b.as_double();
  if ((a.kind == Value::Kind::kBool) != (b.kind == Value::Kind::kBool)) {
    // Python: True == 1; keep it simple and compare as numbers when one side is a bool.
    auto num = [](const Value& v) { return v.kind == Value::Kind::kBool ? double(v.b) : v.as_double(); };
    if ((a.is_number() || a.kind == Value::Kind::kBool) && (b.is_number() || b.kind == Value::Kind::kBool)) {
      return num(a) == num(b);
    }
    return false;
  }
  if (a.kind != b.kind) {
    return (a.is_none() || a.is_undefined()) && (b.is_none() || b.is_undefined()) && a.kind == b.kind;
  }
  switch (a.kind) {
    case Value::Kind::kUndefined: case Value::Kind::kNone: return true;
    case Value::Kind::kBool: return a.b == b.b;
    case Value::Kind::kString: return a.s == b.s;
    case Value::Kind::kList: return *a.list == *b.list;
    case Value::Kind::kDict: return *a.dict == *b.dict;
    case Value::Kind::kMacro: return a.macro == b.macro;
    default: return false;
  }
}

std::string_view kind_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kUndefined: return "undefined";
    case Value::Kind::kNone: return "none";
    case Value::Kind::kBool: return "bool";
    case Value::Kind::kInt: return "int";
    case Value::Kind::kFloat: return "float";
    case Value::Kind::kString: return "string";
    case Value::Kind::kList: return "list";
    case Value::Kind::kDict: return v.is_namespace ? "namespace" : "dict";
    case Value::Kind::kMacro: return "macro";
  }
  return "?";
}

}  // namespace hymoe::tokenizer::jinja
