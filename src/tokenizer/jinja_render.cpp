// Runs the syntax tree: scopes, loops, macros, and Python semantics for operators, filters,
// tests and methods.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <unordered_map>

#include "hymoe/common/error.h"
#include "jinja.h"
#include "jinja_ast.h"

namespace hymoe::tokenizer::jinja {
namespace {

// ---- string helpers (Python str semantics over code points) -------------------------------

std::vector<size_t> char_offsets(const std::string& s) {
  std::vector<size_t> off;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((uint8_t(s[i]) & 0xC0) != 0x80) off.push_back(i);
  }
  off.push_back(s.size());
  return off;
}

bool is_py_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

std::string strip(const std::string& s, const Value* chars, bool left, bool right) {
  auto strip_it = [&](char c) {
    return chars && chars->is_string() ? chars->s.find(c) != std::string::npos : is_py_space(c);
  };
  size_t b = 0, e = s.size();
  if (left) while (b < e && strip_it(s[b])) ++b;
  if (right) while (e > b && strip_it(s[e - 1])) --e;
  return s.substr(b, e - b);
}

Value split(const std::string& s, const Value* sep, int64_t maxsplit) {
  Value out = Value::new_list();
  if (!sep || sep->is_none() || sep->is_undefined()) {
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && is_py_space(s[i])) ++i;
      if (i >= s.size()) break;
      size_t j = i;
      if (maxsplit >= 0 && int64_t(out.list->size()) == maxsplit) {
        j = s.size();
        while (j > i && is_py_space(s[j - 1])) --j;
      } else {
        while (j < s.size() && !is_py_space(s[j])) ++j;
      }
      out.list->push_back(Value::string(s.substr(i, j - i)));
      i = j;
    }
    return out;
  }
  HYMOE_CHECK(sep->is_string() && !sep->s.empty(), kInvalidArgument, "chat template: split() needs a non-empty separator");
  size_t at = 0;
  for (;;) {
    const size_t pos = (maxsplit >= 0 && int64_t(out.list->size()) >= maxsplit) ? std::string::npos : s.find(sep->s, at);
    if (pos == std::string::npos) {
      out.list->push_back(Value::string(s.substr(at)));
      return out;
    }
    out.list->push_back(Value::string(s.substr(at, pos - at)));
    at = pos + sep->s.size();
  }
}

std::string replace_all(std::string s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) return s;
  size_t at = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    const size_t pos = s.find(from, at);
    if (pos == std::string::npos) break;
    s.replace(pos, from.size(), to);
    at = pos + to.size();
  }
  return s;
}

std::string ascii_case(std::string s, bool upper) {
  for (char& c : s) c = char(upper ? std::toupper(uint8_t(c)) : std::tolower(uint8_t(c)));
  return s;
}

std::string title_case(std::string s) {
  bool start = true;
  for (char& c : s) {
    const bool alpha = std::isalpha(uint8_t(c));
    c = char(start ? std::toupper(uint8_t(c)) : std::tolower(uint8_t(c)));
    start = !alpha;
  }
  return s;
}

int64_t py_len(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kString: return int64_t(char_offsets(v.s).size() - 1);
    case Value::Kind::kList: return int64_t(v.list->size());
    case Value::Kind::kDict: return int64_t(v.dict->size());
    case Value::Kind::kUndefined: return 0;
    default: HYMOE_THROW(kInvalidArgument, "chat template: object of type {} has no length", kind_name(v));
  }
}

// Iteration as Python does it: list items, dict keys, string characters.
std::vector<Value> iterate(const Value& v) {
  std::vector<Value> out;
  switch (v.kind) {
    case Value::Kind::kList: return *v.list;
    case Value::Kind::kDict:
      for (const auto& [k, x] : *v.dict) out.push_back(Value::string(k));
      return out;
    case Value::Kind::kString: {
      const auto off = char_offsets(v.s);
      for (size_t k = 0; k + 1 < off.size(); ++k) out.push_back(Value::string(v.s.substr(off[k], off[k + 1] - off[k])));
      return out;
    }
    case Value::Kind::kUndefined: case Value::Kind::kNone: return out;
    default: HYMOE_THROW(kInvalidArgument, "chat template: {} is not iterable", kind_name(v));
  }
}

Value items_of(const Value& v) {
  HYMOE_CHECK(v.kind == Value::Kind::kDict, kInvalidArgument, "chat template: items() of a {}", kind_name(v));
  Value out = Value::new_list();
  for (const auto& [k, x] : *v.dict) {
    Value pair = Value::new_list();
    pair.list->push_back(Value::string(k));
    pair.list->push_back(x);
    out.list->push_back(std::move(pair));
  }
  return out;
}

int compare(const Value& a, const Value& b) {
  if ((a.is_number() || a.kind == Value::Kind::kBool) && (b.is_number() || b.kind == Value::Kind::kBool)) {
    const double x = a.kind == Value::Kind::kBool ? a.b : a.as_double();
    const double y = b.kind == Value::Kind::kBool ? b.b : b.as_double();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) return a.s < b.s ? -1 : a.s > b.s ? 1 : 0;
  HYMOE_THROW(kInvalidArgument, "chat template: cannot order {} and {}", kind_name(a), kind_name(b));
}

bool contains(const Value& hay, const Value& needle) {
  switch (hay.kind) {
    case Value::Kind::kString:
      HYMOE_CHECK(needle.is_string(), kInvalidArgument, "chat template: 'in <string>' needs a string");
      return hay.s.find(needle.s) != std::string::npos;
    case Value::Kind::kList: return std::find(hay.list->begin(), hay.list->end(), needle) != hay.list->end();
    case Value::Kind::kDict: return needle.is_string() && hay.get(needle.s) != nullptr;
    case Value::Kind::kUndefined: case Value::Kind::kNone: return false;
    default: HYMOE_THROW(kInvalidArgument, "chat template: 'in' on a {}", kind_name(hay));
  }
}

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step_v) {
  const int64_t step = step_v.kind == Value::Kind::kInt ? step_v.i : 1;
  HYMOE_CHECK(step != 0, kInvalidArgument, "chat template: slice step cannot be zero");
  std::vector<Value> items;
  const bool is_str = obj.is_string();
  if (is_str) items = iterate(obj);
  else if (obj.kind == Value::Kind::kList) items = *obj.list;
  else HYMOE_THROW(kInvalidArgument, "chat template: cannot slice a {}", kind_name(obj));
  const int64_t n = int64_t(items.size());
  auto norm = [&](const Value& v, int64_t dflt, int64_t lo, int64_t hi) {
    if (v.kind != Value::Kind::kInt) return dflt;
    int64_t x = v.i < 0 ? v.i + n : v.i;
    return std::clamp(x, lo, hi);
  };
  std::vector<Value> out;
  if (step > 0) {
    for (int64_t k = norm(start, 0, 0, n), e = norm(stop, n, 0, n); k < e; k += step) out.push_back(items[size_t(k)]);
  } else {
    for (int64_t k = norm(start, n - 1, -1, n - 1), e = norm(stop, -1, -1, n - 1); k > e; k += step) out.push_back(items[size_t(k)]);
  }
  if (is_str) {
    std::string s;
    for (const auto& v : out) s += v.s;
    return Value::string(s);
  }
  Value l = Value::new_list();
  *l.list = std::move(out);
  return l;
}

// ---- the renderer -------------------------------------------------------------------------

struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  const Value* at(size_t i, std::string_view name) const {
    if (i < pos.size()) return &pos[i];
    for (const auto& [k, v] : kw) {
      if (k == name) return &v;
    }
    return nullptr;
  }
};

class Renderer {
 public:
  explicit Renderer(const Value& globals) {
    scopes_.emplace_back();
    if (globals.kind == Value::Kind::kDict) {
      for (const auto& [k, v] : *globals.dict) scopes_.back()[k] = v;
    }
  }

  enum class Flow { kNormal, kBreak, kContinue };

  Flow exec(const Body& body) {
    for (const NodePtr& n : body) {
      const Flow f = exec(*n);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  std::string out;

 private:
  Flow exec(const Node& n) {
    switch (n.kind) {
      case Node::Kind::kText: out += n.text; return Flow::kNormal;
      case Node::Kind::kOutput: out += eval(*n.expr).str(); return Flow::kNormal;
      case Node::Kind::kIf:
        for (const auto& [cond, body] : n.branches) {
          if (eval(*cond).truthy()) return exec(body);
        }
        return exec(n.else_body);
      case Node::Kind::kFor: return exec_for(n);
      case Node::Kind::kSet: {
        Value v = eval(*n.expr);
        if (n.targets.size() == 1) {
          scopes_.back()[n.targets[0]] = std::move(v);
        } else {
          Value ns = lookup(n.targets[0]);
          HYMOE_CHECK(ns.kind == Value::Kind::kDict && ns.is_namespace, kInvalidArgument,
                      "chat template line {}: cannot set an attribute of {} (a {})", n.line, n.targets[0], kind_name(ns));
          ns.set(n.targets[1], std::move(v));
        }
        return Flow::kNormal;
      }
      case Node::Kind::kMacro: {
        Value m;
        m.kind = Value::Kind::kMacro;
        m.macro = n.macro.get();
        scopes_.back()[n.macro->name] = m;
        return Flow::kNormal;
      }
      case Node::Kind::kBreak: return Flow::kBreak;
      case Node::Kind::kContinue: return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  Flow exec_for(const Node& n) {
    const Value seq = eval(*n.expr);
    std::vector<Value> items = iterate(seq);
    if (n.filter) {
      std::vector<Value> kept;
      for (auto& item : items) {
        scopes_.emplace_back();
        bind_targets(n, item);
        if (eval(*n.filter).truthy()) kept.push_back(item);
        scopes_.pop_back();
      }
      items = std::move(kept);
    }
    if (items.empty()) return exec(n.else_body);
    const int64_t len = int64_t(items.size());
    for (int64_t k = 0; k < len; ++k) {
      scopes_.emplace_back();
      bind_targets(n, items[size_t(k)]);
      Value loop = Value::new_dict();
      loop.set("index", Value::integer(k + 1));
      loop.set("index0", Value::integer(k));
      loop.set("revindex", Value::integer(len - k));
      loop.set("revindex0", Value::integer(len - k - 1));
      loop.set("first", Value::boolean(k == 0));
      loop.set("last", Value::boolean(k == len - 1));
      loop.set("length", Value::integer(len));
      loop.set("previtem", k > 0 ? items[size_t(k - 1)] : Value());
      loop.set("nextitem", k + 1 < len ? items[size_t(k + 1)] : Value());
      scopes_.back()["loop"] = std::move(loop);
      const Flow f = exec(n.body);
      scopes_.pop_back();
      if (f == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  void bind_targets(const Node& n, const Value& item) {
    if (n.targets.size() == 1) {
      scopes_.back()[n.targets[0]] = item;
      return;
    }
    const std::vector<Value> parts = iterate(item);
    HYMOE_CHECK(parts.size() == n.targets.size(), kInvalidArgument,
                "chat template line {}: cannot unpack {} values into {}", n.line, parts.size(), n.targets.size());
    for (size_t k = 0; k < parts.size(); ++k) scopes_.back()[n.targets[k]] = parts[k];
  }

  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return f->second;
    }
    return Value();
  }

  Args eval_args(const Expr& e, size_t first) {
    Args a;
    for (size_t k = first; k < e.kids.size(); ++k) a.pos.push_back(eval(*e.kids[k]));
    for (const auto& [name, x] : e.kwargs) a.kw.emplace_back(name, eval(*x));
    return a;
  }

  Value eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.literal;
      case Expr::Kind::kVar: return lookup(e.name);
      case Expr::Kind::kAttr: {
        const Value obj = eval(*e.kids[0]);
        if (const Value* v = obj.get(e.name)) return *v;
        return Value();
      }
      case Expr::Kind::kIndex: return index(eval(*e.kids[0]), eval(*e.kids[1]));
      case Expr::Kind::kSlice: {
        auto opt = [&](size_t k) { return e.kids[k] ? eval(*e.kids[k]) : Value(); };
        return slice(eval(*e.kids[0]), opt(1), opt(2), opt(3));
      }
      case Expr::Kind::kCall: return call(e);
      case Expr::Kind::kFilter: {
        Value subject = eval(*e.kids[0]);
        return filter(e, std::move(subject), eval_args(e, 1));
      }
      case Expr::Kind::kTest: {
        const Value subject = eval(*e.kids[0]);
        const bool r = test(e.name, subject, eval_args(e, 1), e.line);
        return Value::boolean(e.negate ? !r : r);
      }
      case Expr::Kind::kNot: return Value::boolean(!eval(*e.kids[0]).truthy());
      case Expr::Kind::kNeg: {
        const Value v = eval(*e.kids[0]);
        if (v.kind == Value::Kind::kInt) return Value::integer(-v.i);
        HYMOE_CHECK(v.kind == Value::Kind::kFloat, kInvalidArgument, "chat template line {}: cannot negate a {}", e.line, kind_name(v));
        return Value::number(-v.f);
      }
      case Expr::Kind::kTernary:
        if (eval(*e.kids[0]).truthy()) return eval(*e.kids[1]);
        return e.kids[2] ? eval(*e.kids[2]) : Value();
      case Expr::Kind::kList: {
        Value l = Value::new_list();
        for (const auto& k : e.kids) l.list->push_back(eval(*k));
        return l;
      }
      case Expr::Kind::kDict: {
        Value d = Value::new_dict();
        for (size_t k = 0; k + 1 < e.kids.size(); k += 2) d.set(eval(*e.kids[k]).str(), eval(*e.kids[k + 1]));
        return d;
      }
      case Expr::Kind::kBinary: return binary(e);
    }
    return Value();
  }

  static Value index(const Value& obj, const Value& key) {
    if (obj.kind == Value::Kind::kDict) {
      if (!key.is_string()) return Value();
      const Value* v = obj.get(key.s);
      return v ? *v : Value();
    }
    if (key.kind != Value::Kind::kInt) return Value();
    if (obj.kind == Value::Kind::kList) {
      const int64_t n = int64_t(obj.list->size());
      const int64_t k = key.i < 0 ? key.i + n : key.i;
      return k >= 0 && k < n ? (*obj.list)[size_t(k)] : Value();
    }
    if (obj.is_string()) {
      const auto off = char_offsets(obj.s);
      const int64_t n = int64_t(off.size()) - 1;
      const int64_t k = key.i < 0 ? key.i + n : key.i;
      return k >= 0 && k < n ? Value::string(obj.s.substr(off[size_t(k)], off[size_t(k) + 1] - off[size_t(k)])) : Value();
    }
    return Value();
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    if (op == "and") {
      Value a = eval(*e.kids[0]);
      return a.truthy() ? eval(*e.kids[1]) : a;
    }
    if (op == "or") {
      Value a = eval(*e.kids[0]);
      return a.truthy() ? a : eval(*e.kids[1]);
    }
    const Value a = eval(*e.kids[0]);
    const Value b = eval(*e.kids[1]);
    if (op == "==") return Value::boolean(a == b);
    if (op == "!=") return Value::boolean(!(a == b));
    if (op == "<") return Value::boolean(compare(a, b) < 0);
    if (op == ">") return Value::boolean(compare(a, b) > 0);
    if (op == "<=") return Value::boolean(compare(a, b) <= 0);
    if (op == ">=") return Value::boolean(compare(a, b) >= 0);
    if (op == "in") return Value::boolean(contains(b, a));
    if (op == "not in") return Value::boolean(!contains(b, a));
    if (op == "~") return Value::string(a.str() + b.str());
    if (op == "+") {
      if (a.is_string() && b.is_string()) return Value::string(a.s + b.s);
      if (a.kind == Value::Kind::kList && b.kind == Value::Kind::kList) {
        Value l = Value::new_list();
        *l.list = *a.list;
        l.list->insert(l.list->end(), b.list->begin(), b.list->end());
        return l;
      }
    }
    if (op == "*" && a.is_string() && b.kind == Value::Kind::kInt) {
      std::string s;
      for (int64_t k = 0; k < b.i; ++k) s += a.s;
      return Value::string(s);
    }
    HYMOE_CHECK(a.is_number() && b.is_number(), kInvalidArgument,
                "chat template line {}: unsupported operand types for {}: {} and {}", e.line, op, kind_name(a), kind_name(b));
    const bool ints = a.kind == Value::Kind::kInt && b.kind == Value::Kind::kInt;
    const double x = a.as_double(), y = b.as_double();
    if (op == "+") return ints ? Value::integer(a.i + b.i) : Value::number(x + y);
    if (op == "-") return ints ? Value::integer(a.i - b.i) : Value::number(x - y);
    if (op == "*") return ints ? Value::integer(a.i * b.i) : Value::number(x * y);
    HYMOE_CHECK(op == "**" || y != 0, kInvalidArgument, "chat template line {}: division by zero", e.line);
    if (op == "/") return Value::number(x / y);
    if (op == "//") return ints ? Value::integer(int64_t(std::floor(x / y))) : Value::number(std::floor(x / y));
    if (op == "%") {
      if (ints) return Value::integer(((a.i % b.i) + b.i) % b.i);
      return Value::number(x - y * std::floor(x / y));
    }
    if (op == "**") return ints && b.i >= 0 ? Value::integer(int64_t(std::pow(x, y))) : Value::number(std::pow(x, y));
    HYMOE_THROW(kInternal, "chat template: unknown operator {}", op);
  }

  Value call(const Expr& e) {
    const Expr& callee = *e.kids[0];
    Args args = eval_args(e, 1);
    if (callee.kind == Expr::Kind::kAttr) {
      const Value obj = eval(*callee.kids[0]);
      if (const Value* m = obj.get(callee.name); m && m->kind == Value::Kind::kMacro) return call_macro(*m->macro, args);
      return method(obj, callee.name, args, e.line);
    }
    const Value fn = eval(callee);
    if (fn.kind == Value::Kind::kMacro) return call_macro(*fn.macro, args);
    HYMOE_CHECK(callee.kind == Expr::Kind::kVar, kUnsupported, "chat template line {}: this call is not supported", e.line);
    const std::string& name = callee.name;
    if (name == "raise_exception") {
      HYMOE_THROW(kInvalidArgument, "chat template raised: {}", args.pos.empty() ? "" : args.pos[0].str());
    }
    if (name == "namespace") {
      Value ns = Value::new_dict();
      ns.is_namespace = true;
      for (auto& [k, v] : args.kw) ns.set(k, v);
      return ns;
    }
    if (name == "range") {
      int64_t start = 0, stop = 0, step = 1;
      if (args.pos.size() == 1) stop = args.pos[0].i;
      if (args.pos.size() >= 2) { start = args.pos[0].i; stop = args.pos[1].i; }
      if (args.pos.size() >= 3) step = args.pos[2].i;
      HYMOE_CHECK(step != 0, kInvalidArgument, "chat template: range() step is zero");
      Value l = Value::new_list();
      for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) l.list->push_back(Value::integer(k));
      return l;
    }
    if (name == "strftime_now") {
      const std::time_t t = std::time(nullptr);
      std::tm tm{};
      localtime_r(&t, &tm);
      char buf[256];
      const std::string fmt_s = args.pos.empty() ? "" : args.pos[0].str();
      const size_t n = std::strftime(buf, sizeof buf, fmt_s.c_str(), &tm);
      return Value::string(std::string(buf, n));
    }
    if (name == "dict") {
      Value d = Value::new_dict();
      for (auto& [k, v] : args.kw) d.set(k, v);
      return d;
    }
    HYMOE_THROW(kUnsupported, "chat template line {}: function '{}' is not supported", e.line, name);
  }

  Value call_macro(const MacroDef& m, const Args& args) {
    std::unordered_map<std::string, Value> frame;
    for (size_t k = 0; k < m.params.size(); ++k) {
      if (const Value* v = args.at(k, m.params[k])) frame[m.params[k]] = *v;
      else if (m.defaults[k]) frame[m.params[k]] = eval(*m.defaults[k]);
      else frame[m.params[k]] = Value();
    }
    std::string saved;
    saved.swap(out);
    scopes_.push_back(std::move(frame));
    exec(m.body);
    scopes_.pop_back();
    saved.swap(out);
    return Value::string(std::move(saved));
  }

  Value method(const Value& obj, const std::string& name, const Args& a, int line) {
    if (obj.is_string()) {
      const std::string& s = obj.s;
      if (name == "strip") return Value::string(strip(s, a.at(0, "chars"), true, true));
      if (name == "lstrip") return Value::string(strip(s, a.at(0, "chars"), true, false));
      if (name == "rstrip") return Value::string(strip(s, a.at(0, "chars"), false, true));
      if (name == "split") {
        const Value* max = a.at(1, "maxsplit");
        return split(s, a.at(0, "sep"), max && max->kind == Value::Kind::kInt ? max->i : -1);
      }
      if (name == "startswith" || name == "endswith") {
        const Value* p = a.at(0, "prefix");
        HYMOE_CHECK(p && p->is_string(), kInvalidArgument, "chat template line {}: {} needs a string", line, name);
        const bool r = name == "startswith" ? s.starts_with(p->s) : s.ends_with(p->s);
        return Value::boolean(r);
      }
      if (name == "replace") {
        const Value* from = a.at(0, "old");
        const Value* to = a.at(1, "new");
        const Value* count = a.at(2, "count");
        HYMOE_CHECK(from && to, kInvalidArgument, "chat template line {}: replace needs two strings", line);
        return Value::string(replace_all(s, from->str(), to->str(), count ? count->i : -1));
      }
      if (name == "upper") return Value::string(ascii_case(s, true));
      if (name == "lower") return Value::string(ascii_case(s, false));
      if (name == "title") return Value::string(title_case(s));
      if (name == "capitalize") {
        std::string r = ascii_case(s, false);
        if (!r.empty()) r[0] = char(std::toupper(uint8_t(r[0])));
        return Value::string(r);
      }
      if (name == "find") {
        const Value* sub = a.at(0, "sub");
        const size_t pos = sub ? s.find(sub->str()) : std::string::npos;
        return Value::integer(pos == std::string::npos ? -1 : int64_t(char_offsets(s.substr(0, pos)).size() - 1));
      }
      if (name == "join") {
        std::string r;
        const Value* seq = a.at(0, "iterable");
        bool first = true;
        if (seq) for (const Value& v : iterate(*seq)) { r += (first ? "" : s) + v.str(); first = false; }
        return Value::string(r);
      }
      if (name == "splitlines") {
        Value l = Value::new_list();
        size_t at = 0;
        while (at < s.size()) {
          size_t nl = s.find('\n', at);
          if (nl == std::string::npos) nl = s.size();
          std::string part = s.substr(at, nl - at);
          if (!part.empty() && part.back() == '\r') part.pop_back();
          l.list->push_back(Value::string(part));
          at = nl + 1;
        }
        return l;
      }
    } else if (obj.kind == Value::Kind::kDict) {
      if (name == "get") {
        const Value* key = a.at(0, "key");
        const Value* v = key ? obj.get(key->str()) : nullptr;
        if (v) return *v;
        const Value* dflt = a.at(1, "default");
        return dflt ? *dflt : Value::none();
      }
      if (name == "items") return items_of(obj);
      if (name == "keys" || name == "values") {
        Value l = Value::new_list();
        for (const auto& [k, v] : *obj.dict) l.list->push_back(name == "keys" ? Value::string(k) : v);
        return l;
      }
    } else if (obj.kind == Value::Kind::kList) {
      if (name == "append") {
        HYMOE_CHECK(!a.pos.empty(), kInvalidArgument, "chat template line {}: append needs a value", line);
        obj.list->push_back(a.pos[0]);
        return Value::none();
      }
    }
    HYMOE_THROW(kUnsupported, "chat template line {}: method '{}' of a {} is not supported", line, name, kind_name(obj));
  }

  bool test(const std::string& name, const Value& v, const Args& a, int line) {
    const Value* arg = a.at(0, "value");
    if (name == "defined") return !v.is_undefined();
    if (name == "undefined") return v.is_undefined();
    if (name == "none") return v.is_none();
    if (name == "string") return v.is_string();
    if (name == "number") return v.is_number();
    if (name == "integer") return v.kind == Value::Kind::kInt;
    if (name == "float") return v.kind == Value::Kind::kFloat;
    if (name == "boolean") return v.kind == Value::Kind::kBool;
    if (name == "true") return v.kind == Value::Kind::kBool && v.b;
    if (name == "false") return v.kind == Value::Kind::kBool && !v.b;
    if (name == "mapping") return v.kind == Value::Kind::kDict;
    if (name == "iterable" || name == "sequence") {
      return v.kind == Value::Kind::kList || v.kind == Value::Kind::kDict || v.is_string();
    }
    if (name == "callable") return v.kind == Value::Kind::kMacro;
    if (name == "odd" || name == "even") {
      HYMOE_CHECK(v.kind == Value::Kind::kInt, kInvalidArgument, "chat template line {}: {} needs an integer", line, name);
      return (((v.i % 2) + 2) % 2 == 1) == (name == "odd");
    }
    if (name == "divisibleby") return arg && arg->kind == Value::Kind::kInt && arg->i != 0 && v.i % arg->i == 0;
    if (name == "eq" || name == "equalto" || name == "sameas") return arg && v == *arg;
    if (name == "ne") return !(arg && v == *arg);
    if (name == "lower") return v.is_string() && v.s == ascii_case(v.s, false);
    if (name == "upper") return v.is_string() && v.s == ascii_case(v.s, true);
    if (name == "in") return arg && contains(*arg, v);
    HYMOE_THROW(kUnsupported, "chat template line {}: test '{}' is not supported", line, name);
  }

  // transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
  static JsonStyle json_style(const Args& a, int line) {
    JsonStyle st;
    if (const Value* x = a.at(0, "ensure_ascii")) st.ensure_ascii = x->truthy();
    if (const Value* x = a.at(1, "indent"); x && !x->is_none()) {
      if (x->kind == Value::Kind::kInt) {
        st.indent = std::string(x->i > 0 ? size_t(x->i) : 0, ' ');
      } else if (x->is_string()) {
        st.indent = x->s;
      } else {
        HYMOE_THROW(kInvalidArgument, "chat template line {}: tojson indent must be an integer or a string", line);
      }
    }
    if (const Value* x = a.at(2, "separators"); x && !x->is_none()) {
      HYMOE_CHECK(x->kind == Value::Kind::kList && x->list->size() == 2 && (*x->list)[0].is_string() &&
                      (*x->list)[1].is_string(),
                  kInvalidArgument, "chat template line {}: tojson separators must be two strings", line);
      st.item_sep = (*x->list)[0].s;
      st.key_sep = (*x->list)[1].s;
    }
    if (const Value* x = a.at(3, "sort_keys")) st.sort_keys = x->truthy();
    return st;
  }

  Value filter(const Expr& e, Value v, const Args& a) {
    const std::string& name = e.name;
    if (name == "tojson") return Value::string(v.to_json(json_style(a, e.line)));
    if (name == "length" || name == "count") return Value::integer(py_len(v));
    if (name == "first" || name == "last") {
      const std::vector<Value> items = iterate(v);
      if (items.empty()) return Value();
      return name == "first" ? items.front() : items.back();
    }
    if (name == "join") {
      const Value* sep = a.at(0, "d");
      const Value* attr = a.at(1, "attribute");
      std::string r;
      bool first = true;
      for (const Value& x : iterate(v)) {
        const Value* item = attr ? x.get(attr->str()) : &x;
        r += (first ? "" : (sep ? sep->str() : "")) + (item ? item->str() : "");
        first = false;
      }
      return Value::string(r);
    }
    if (name == "trim") return Value::string(strip(v.str(), a.at(0, "chars"), true, true));
    if (name == "upper") return Value::string(ascii_case(v.str(), true));
    if (name == "lower") return Value::string(ascii_case(v.str(), false));
    if (name == "capitalize") {
      std::string r = ascii_case(v.str(), false);
      if (!r.empty()) r[0] = char(std::toupper(uint8_t(r[0])));
      return Value::string(r);
    }
    if (name == "title") return Value::string(title_case(v.str()));
    if (name == "default" || name == "d") {
      const Value* dflt = a.at(0, "default_value");
      const Value* boolean = a.at(1, "boolean");
      const bool use = v.is_undefined() || (boolean && boolean->truthy() && !v.truthy());
      return use ? (dflt ? *dflt : Value::string("")) : v;
    }
    if (name == "string") return Value::string(v.str());
    if (name == "safe") return v;
    if (name == "int") {
      if (v.kind == Value::Kind::kFloat) return Value::integer(int64_t(v.f));
      if (v.kind == Value::Kind::kInt) return v;
      try { return Value::integer(std::stoll(v.str())); } catch (const std::exception&) { return Value::integer(0); }
    }
    if (name == "float") {
      if (v.is_number()) return Value::number(v.as_double());
      try { return Value::number(std::stod(v.str())); } catch (const std::exception&) { return Value::number(0); }
    }
    if (name == "abs") return v.kind == Value::Kind::kInt ? Value::integer(std::llabs(v.i)) : Value::number(std::fabs(v.as_double()));
    if (name == "round") {
      const Value* prec = a.at(0, "precision");
      const double scale = std::pow(10.0, prec && prec->kind == Value::Kind::kInt ? double(prec->i) : 0.0);
      return Value::number(std::round(v.as_double() * scale) / scale);
    }
    if (name == "list") {
      Value l = Value::new_list();
      *l.list = iterate(v);
      return l;
    }
    if (name == "items") return items_of(v);
    if (name == "dictsort") {
      Value l = items_of(v);
      std::stable_sort(l.list->begin(), l.list->end(), [](const Value& x, const Value& y) { return (*x.list)[0].s < (*y.list)[0].s; });
      return l;
    }
    if (name == "reverse") {
      if (v.is_string()) {
        std::vector<Value> cs = iterate(v);
        std::string r;
        for (auto it = cs.rbegin(); it != cs.rend(); ++it) r += it->s;
        return Value::string(r);
      }
      Value l = Value::new_list();
      *l.list = iterate(v);
      std::reverse(l.list->begin(), l.list->end());
      return l;
    }
    if (name == "replace") {
      const Value* from = a.at(0, "old");
      const Value* to = a.at(1, "new");
      HYMOE_CHECK(from && to, kInvalidArgument, "chat template line {}: replace needs two strings", e.line);
      return Value::string(replace_all(v.str(), from->str(), to->str(), -1));
    }
    if (name == "unique") {
      Value l = Value::new_list();
      for (const Value& x : iterate(v)) {
        if (std::find(l.list->begin(), l.list->end(), x) == l.list->end()) l.list->push_back(x);
      }
      return l;
    }
    if (name == "indent") {
      const Value* width = a.at(0, "width");
      const Value* first = a.at(1, "first");
      const std::string pad(width && width->kind == Value::Kind::kInt ? size_t(width->i) : 4, ' ');
      std::string s = v.str(), r;
      bool at_line_start = first && first->truthy();
      for (size_t k = 0; k < s.size(); ++k) {
        if (at_line_start && s[k] != '\n') r += pad;
        at_line_start = false;
        r.push_back(s[k]);
        if (s[k] == '\n') at_line_start = true;
      }
      return Value::string(r);
    }
    if (name == "map") {
      const Value* attr = a.at(99, "attribute");
      Value l = Value::new_list();
      for (const Value& x : iterate(v)) {
        if (attr) {
          const Value* f = x.get(attr->str());
          l.list->push_back(f ? *f : Value());
        } else {
          HYMOE_CHECK(!a.pos.empty() && a.pos[0].is_string(), kUnsupported, "chat template line {}: map() needs attribute= or a filter name", e.line);
          Expr fe;
          fe.kind = Expr::Kind::kFilter;
          fe.name = a.pos[0].s;
          fe.line = e.line;
          Args rest;
          rest.pos.assign(a.pos.begin() + 1, a.pos.end());
          l.list->push_back(filter(fe, x, rest));
        }
      }
      return l;
    }
    if (name == "selectattr" || name == "rejectattr") {
      HYMOE_CHECK(!a.pos.empty(), kInvalidArgument, "chat template line {}: {} needs an attribute", e.line, name);
      const std::string attr = a.pos[0].str();
      Args targs;
      if (a.pos.size() > 2) targs.pos.assign(a.pos.begin() + 2, a.pos.end());
      Value l = Value::new_list();
      for (const Value& x : iterate(v)) {
        const Value* f = x.get(attr);
        const Value fv = f ? *f : Value();
        const bool ok = a.pos.size() > 1 ? test(a.pos[1].str(), fv, targs, e.line) : fv.truthy();
        if (ok == (name == "selectattr")) l.list->push_back(x);
      }
      return l;
    }
    HYMOE_THROW(kUnsupported, "chat template line {}: filter '{}' is not supported", e.line, name);
  }

  std::vector<std::unordered_map<std::string, Value>> scopes_;
};

}  // namespace

std::string Template::render(const Value& globals) const {
  Renderer r(globals);
  r.exec(body_);
  return std::move(r.out);
}

}  // namespace hymoe::tokenizer::jinja
