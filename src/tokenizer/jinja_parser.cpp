// Template text -> syntax tree: tag splitting with whitespace control, an expression lexer and
// a recursive-descent parser following Jinja's operator precedence.
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "hymoe/common/error.h"
#include "hymoe/tokenizer/utf8.h"
#include "jinja.h"
#include "jinja_ast.h"

namespace hymoe::tokenizer::jinja {
namespace {

// ---- tags ---------------------------------------------------------------------------------

struct Segment {
  enum class Type { kText, kExpr, kStmt, kComment } type;
  std::string body;
  int line = 1;
  bool strip_before = false, strip_after = false, keep_before = false;
};

std::vector<Segment> split_tags(std::string_view src) {
  std::vector<Segment> segs;
  size_t pos = 0;
  int line = 1;
  auto count_lines = [&](size_t from, size_t to) {
    line += int(std::count(src.begin() + long(from), src.begin() + long(to), '\n'));
  };
  while (pos < src.size()) {
    size_t open = std::string_view::npos;
    for (size_t p = src.find('{', pos); p != std::string_view::npos; p = src.find('{', p + 1)) {
      if (p + 1 < src.size() && (src[p + 1] == '{' || src[p + 1] == '%' || src[p + 1] == '#')) {
        open = p;
        break;
      }
    }
    const size_t text_end = open == std::string_view::npos ? src.size() : open;
    if (text_end > pos) segs.push_back({Segment::Type::kText, std::string(src.substr(pos, text_end - pos)), line});
    count_lines(pos, text_end);
    if (open == std::string_view::npos) break;
    const char kind = src[open + 1];
    Segment seg{kind == '{' ? Segment::Type::kExpr : kind == '%' ? Segment::Type::kStmt : Segment::Type::kComment, "", line};
    size_t p = open + 2;
    if (p < src.size() && src[p] == '-') { seg.strip_before = true; ++p; }
    else if (p < src.size() && src[p] == '+') { seg.keep_before = true; ++p; }
    const char close = kind == '{' ? '}' : kind == '%' ? '%' : '#';
    size_t end = std::string_view::npos;
    char quote = 0;
    for (size_t q = p; q + 1 < src.size(); ++q) {
      const char c = src[q];
      if (kind != '#' && quote) {
        if (c == '\\') { ++q; continue; }
        if (c == quote) quote = 0;
        continue;
      }
      if (kind != '#' && (c == '\'' || c == '"')) { quote = c; continue; }
      if (c == close && src[q + 1] == '}') { end = q; break; }
    }
    HYMOE_CHECK(end != std::string_view::npos, kCorruptData, "chat template line {}: unclosed tag", line);
    size_t body_end = end;
    if (body_end > p && src[body_end - 1] == '-') { seg.strip_after = true; --body_end; }
    seg.body = std::string(src.substr(p, body_end - p));
    count_lines(open, end + 2);
    segs.push_back(std::move(seg));
    pos = end + 2;
  }
  // Whitespace control, then transformers' trim_blocks / lstrip_blocks.
  auto is_ws = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
  for (size_t k = 0; k < segs.size(); ++k) {
    Segment& s = segs[k];
    if (s.type == Segment::Type::kText) continue;
    const bool block = s.type != Segment::Type::kExpr;
    Segment* prev = k > 0 && segs[k - 1].type == Segment::Type::kText ? &segs[k - 1] : nullptr;
    Segment* next = k + 1 < segs.size() && segs[k + 1].type == Segment::Type::kText ? &segs[k + 1] : nullptr;
    if (prev) {
      std::string& t = prev->body;
      if (s.strip_before) {
        while (!t.empty() && is_ws(t.back())) t.pop_back();
      } else if (block && !s.keep_before) {
        size_t i = t.size();
        while (i > 0 && (t[i - 1] == ' ' || t[i - 1] == '\t')) --i;
        if ((i > 0 && t[i - 1] == '\n') || (i == 0 && k == 1)) t.resize(i);
      }
    }
    if (next) {
      std::string& t = next->body;
      if (s.strip_after) {
        size_t i = 0;
        while (i < t.size() && is_ws(t[i])) ++i;
        t.erase(0, i);
      } else if (block && !t.empty() && t[0] == '\n') {
        t.erase(0, 1);
      } else if (block && t.size() >= 2 && t[0] == '\r' && t[1] == '\n') {
        t.erase(0, 2);
      }
    }
  }
  return segs;
}

// ---- expression tokens --------------------------------------------------------------------

struct Tok {
  enum class Type { kName, kString, kInt, kFloat, kOp, kEnd } type;
  std::string text;
  Value value;
};

std::vector<Tok> lex(const std::string& s, int line) {
  std::vector<Tok> toks;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (std::isspace(uint8_t(c))) { ++i; continue; }
    if (std::isalpha(uint8_t(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(uint8_t(s[j])) || s[j] == '_')) ++j;
      toks.push_back({Tok::Type::kName, s.substr(i, j - i), {}});
      i = j;
      continue;
    }
    if (std::isdigit(uint8_t(c))) {
      size_t j = i;
      while (j < s.size() && (std::isdigit(uint8_t(s[j])) || s[j] == '_')) ++j;
      bool is_float = false;
      if (j + 1 < s.size() && s[j] == '.' && std::isdigit(uint8_t(s[j + 1]))) {
        is_float = true;
        ++j;
        while (j < s.size() && std::isdigit(uint8_t(s[j]))) ++j;
      }
      std::string num = s.substr(i, j - i);
      std::erase(num, '_');
      toks.push_back({is_float ? Tok::Type::kFloat : Tok::Type::kInt, num,
                      is_float ? Value::number(std::stod(num)) : Value::integer(std::stoll(num))});
      i = j;
      continue;
    }
    if (c == '\'' || c == '"') {
      std::string out;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != c; ++j) {
        if (s[j] != '\\' || j + 1 >= s.size()) { out.push_back(s[j]); continue; }
        const char e = s[++j];
        switch (e) {
          case 'n': out.push_back('\n'); break;
          case 't': out.push_back('\t'); break;
          case 'r': out.push_back('\r'); break;
          case '\\': out.push_back('\\'); break;
          case '\'': out.push_back('\''); break;
          case '"': out.push_back('"'); break;
          case 'u': {
            HYMOE_CHECK(j + 4 < s.size(), kCorruptData, "chat template line {}: bad \\u escape", line);
            utf8::append(out, uint32_t(std::stoul(s.substr(j + 1, 4), nullptr, 16)));
            j += 4;
            break;
          }
          default: out.push_back('\\'); out.push_back(e);
        }
      }
      HYMOE_CHECK(j < s.size(), kCorruptData, "chat template line {}: unterminated string", line);
      toks.push_back({Tok::Type::kString, out, Value::string(out)});
      i = j + 1;
      continue;
    }
    static const char* ops[] = {"//", "**", "==", "!=", "<=", ">=", "(", ")", "[", "]", "{", "}",
                                ",", ".", ":", "|", "~", "+", "-", "*", "/", "%", "<", ">", "="};
    bool matched = false;
    for (const char* op : ops) {
      const size_t n = std::char_traits<char>::length(op);
      if (s.compare(i, n, op) == 0) {
        toks.push_back({Tok::Type::kOp, op, {}});
        i += n;
        matched = true;
        break;
      }
    }
    HYMOE_CHECK(matched, kCorruptData, "chat template line {}: unexpected character '{}'", line, c);
  }
  toks.push_back({Tok::Type::kEnd, "", {}});
  return toks;
}

const std::set<std::string> kFilters = {
    "tojson", "length", "count", "first", "last", "join", "trim", "upper", "lower", "default",
    "d", "string", "int", "float", "list", "items", "reverse", "capitalize", "title", "replace",
    "abs", "safe", "round", "unique", "map", "selectattr", "rejectattr", "indent", "dictsort"};
const std::set<std::string> kTests = {
    "defined", "undefined", "none", "string", "number", "integer", "float", "mapping",
    "iterable", "sequence", "boolean", "true", "false", "odd", "even", "divisibleby", "eq",
    "equalto", "ne", "lower", "upper", "in", "callable", "sameas"};

// ---- expression parser --------------------------------------------------------------------

class ExprParser {
 public:
  ExprParser(std::vector<Tok> toks, int line) : t_(std::move(toks)), line_(line) {}

  ExprPtr parse_expression() { return parse_ternary(); }
  ExprPtr parse_expression_no_ternary() { return parse_or(); }
  const Tok& peek(size_t k = 0) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
  bool at_end() const { return peek().type == Tok::Type::kEnd; }
  bool is_op(const char* op, size_t k = 0) const { return peek(k).type == Tok::Type::kOp && peek(k).text == op; }
  bool is_name(const char* n, size_t k = 0) const { return peek(k).type == Tok::Type::kName && peek(k).text == n; }
  bool accept_op(const char* op) { if (is_op(op)) { ++p_; return true; } return false; }
  bool accept_name(const char* n) { if (is_name(n)) { ++p_; return true; } return false; }
  void expect_op(const char* op) {
    HYMOE_CHECK(accept_op(op), kCorruptData, "chat template line {}: expected '{}' before '{}'", line_, op, peek().text);
  }
  std::string expect_name() {
    HYMOE_CHECK(peek().type == Tok::Type::kName, kCorruptData, "chat template line {}: expected a name before '{}'", line_, peek().text);
    return t_[p_++].text;
  }
  void expect_end() {
    HYMOE_CHECK(at_end(), kCorruptData, "chat template line {}: unexpected '{}'", line_, peek().text);
  }
  int line() const { return line_; }

 private:
  ExprPtr node(Expr::Kind k) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line_;
    return e;
  }
  ExprPtr binary(std::string op, ExprPtr a, ExprPtr b) {
    auto e = node(Expr::Kind::kBinary);
    e->name = std::move(op);
    e->kids.push_back(std::move(a));
    e->kids.push_back(std::move(b));
    return e;
  }

  ExprPtr parse_ternary() {
    ExprPtr a = parse_or();
    while (is_name("if")) {
      ++p_;
      ExprPtr cond = parse_or();
      ExprPtr other;
      if (accept_name("else")) other = parse_ternary();
      auto e = node(Expr::Kind::kTernary);
      e->kids.push_back(std::move(cond));
      e->kids.push_back(std::move(a));
      e->kids.push_back(std::move(other));  // may be null: undefined
      a = std::move(e);
    }
    return a;
  }
  ExprPtr parse_or() {
    ExprPtr a = parse_and();
    while (accept_name("or")) a = binary("or", std::move(a), parse_and());
    return a;
  }
  ExprPtr parse_and() {
    ExprPtr a = parse_not();
    while (accept_name("and")) a = binary("and", std::move(a), parse_not());
    return a;
  }
  ExprPtr parse_not() {
    if (accept_name("not")) {
      auto e = node(Expr::Kind::kNot);
      e->kids.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr a = parse_math1();
    for (;;) {
      std::string op;
      if (peek().type == Tok::Type::kOp && (peek().text == "==" || peek().text == "!=" || peek().text == "<" ||
                                            peek().text == ">" || peek().text == "<=" || peek().text == ">=")) {
        op = t_[p_++].text;
      } else if (is_name("in")) {
        ++p_;
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        p_ += 2;
        op = "not in";
      } else {
        return a;
      }
      a = binary(op, std::move(a), parse_math1());
    }
  }
  ExprPtr parse_math1() {
    ExprPtr a = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = t_[p_++].text;
      a = binary(op, std::move(a), parse_concat());
    }
    return a;
  }
  ExprPtr parse_concat() {
    ExprPtr a = parse_math2();
    while (accept_op("~")) a = binary("~", std::move(a), parse_math2());
    return a;
  }
  ExprPtr parse_math2() {
    ExprPtr a = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = t_[p_++].text;
      a = binary(op, std::move(a), parse_pow());
    }
    return a;
  }
  ExprPtr parse_pow() {
    ExprPtr a = parse_unary();
    while (accept_op("**")) a = binary("**", std::move(a), parse_unary());
    return a;
  }
  ExprPtr parse_unary() {
    if (accept_op("-")) {
      auto e = node(Expr::Kind::kNeg);
      e->kids.push_back(parse_unary());
      return e;
    }
    if (accept_op("+")) return parse_unary();
    ExprPtr a = parse_postfix(parse_primary());
    return parse_filters(std::move(a));
  }
  void parse_call_args(Expr& e) {
    // after '(' ; fills kids (positional) and kwargs until ')'
    while (!accept_op(")")) {
      if (peek().type == Tok::Type::kName && is_op("=", 1)) {
        std::string k = t_[p_].text;
        p_ += 2;
        e.kwargs.emplace_back(k, parse_expression());
      } else {
        e.kids.push_back(parse_expression());
      }
      if (!is_op(")")) expect_op(",");
    }
  }
  ExprPtr parse_postfix(ExprPtr a) {
    for (;;) {
      if (accept_op(".")) {
        auto e = node(Expr::Kind::kAttr);
        e->name = expect_name();
        e->kids.push_back(std::move(a));
        a = std::move(e);
      } else if (accept_op("[")) {
        ExprPtr start, stop, step;
        bool slice = false;
        if (!is_op(":")) start = parse_expression();
        if (accept_op(":")) {
          slice = true;
          if (!is_op("]") && !is_op(":")) stop = parse_expression();
          if (accept_op(":") && !is_op("]")) step = parse_expression();
        }
        expect_op("]");
        auto e = node(slice ? Expr::Kind::kSlice : Expr::Kind::kIndex);
        e->kids.push_back(std::move(a));
        e->kids.push_back(std::move(start));
        if (slice) {
          e->kids.push_back(std::move(stop));
          e->kids.push_back(std::move(step));
        }
        a = std::move(e);
      } else if (accept_op("(")) {
        auto e = node(Expr::Kind::kCall);
        e->kids.push_back(std::move(a));
        parse_call_args(*e);
        a = std::move(e);
      } else {
        return a;
      }
    }
  }
  ExprPtr parse_filters(ExprPtr a) {
    for (;;) {
      if (accept_op("|")) {
        auto e = node(Expr::Kind::kFilter);
        e->name = expect_name();
        HYMOE_CHECK(kFilters.count(e->name), kUnsupported, "chat template line {}: filter '{}' is not supported", line_, e->name);
        e->kids.push_back(std::move(a));
        if (accept_op("(")) parse_call_args(*e);
        a = parse_postfix(std::move(e));
      } else if (is_name("is")) {
        ++p_;
        auto e = node(Expr::Kind::kTest);
        e->negate = accept_name("not");
        e->name = expect_name();
        HYMOE_CHECK(kTests.count(e->name), kUnsupported, "chat template line {}: test '{}' is not supported", line_, e->name);
        e->kids.push_back(std::move(a));
        if (accept_op("(")) {
          parse_call_args(*e);
        } else if (!at_end() && (peek().type == Tok::Type::kString || peek().type == Tok::Type::kInt ||
                                 peek().type == Tok::Type::kFloat ||
                                 (peek().type == Tok::Type::kName && !is_name("and") && !is_name("or") &&
                                  !is_name("else") && !is_name("if") && !is_name("in") && !is_name("not")))) {
          e->kids.push_back(parse_primary());  // `x is divisibleby 3`
        }
        a = std::move(e);
      } else {
        return a;
      }
    }
  }
  ExprPtr parse_primary() {
    const Tok& tk = peek();
    if (tk.type == Tok::Type::kString) {
      // Adjacent string literals concatenate.
      std::string s;
      while (peek().type == Tok::Type::kString) s += t_[p_++].text;
      auto e = node(Expr::Kind::kLiteral);
      e->literal = Value::string(s);
      return e;
    }
    if (tk.type == Tok::Type::kInt || tk.type == Tok::Type::kFloat) {
      auto e = node(Expr::Kind::kLiteral);
      e->literal = t_[p_++].value;
      return e;
    }
    if (tk.type == Tok::Type::kName) {
      const std::string n = t_[p_++].text;
      auto e = node(Expr::Kind::kLiteral);
      if (n == "true" || n == "True") { e->literal = Value::boolean(true); return e; }
      if (n == "false" || n == "False") { e->literal = Value::boolean(false); return e; }
      if (n == "none" || n == "None") { e->literal = Value::none(); return e; }
      e->kind = Expr::Kind::kVar;
      e->name = n;
      return e;
    }
    if (accept_op("(")) {
      ExprPtr first = parse_expression();
      if (accept_op(")")) return first;
      auto e = node(Expr::Kind::kList);  // a tuple
      e->kids.push_back(std::move(first));
      while (accept_op(",")) {
        if (is_op(")")) break;
        e->kids.push_back(parse_expression());
      }
      expect_op(")");
      return e;
    }
    if (accept_op("[")) {
      auto e = node(Expr::Kind::kList);
      while (!accept_op("]")) {
        e->kids.push_back(parse_expression());
        if (!is_op("]")) expect_op(",");
      }
      return e;
    }
    if (accept_op("{")) {
      auto e = node(Expr::Kind::kDict);
      while (!accept_op("}")) {
        e->kids.push_back(parse_expression());
        expect_op(":");
        e->kids.push_back(parse_expression());
        if (!is_op("}")) expect_op(",");
      }
      return e;
    }
    HYMOE_THROW(kCorruptData, "chat template line {}: unexpected '{}' in an expression", line_, tk.text);
  }

  std::vector<Tok> t_;
  size_t p_ = 0;
  int line_;
};

// ---- statements ---------------------------------------------------------------------------

class StmtParser {
 public:
  explicit StmtParser(std::vector<Segment> segs) : segs_(std::move(segs)) {}

  // Parses until one of `ends` (statement keywords) or the end; returns the keyword met.
  std::string parse_body(Body& out, const std::set<std::string>& ends) {
    while (k_ < segs_.size()) {
      Segment& s = segs_[k_];
      if (s.type == Segment::Type::kText) {
        if (!s.body.empty()) {
          auto n = make(Node::Kind::kText, s.line);
          n->text = s.body;
          out.push_back(std::move(n));
        }
        ++k_;
        continue;
      }
      if (s.type == Segment::Type::kComment) { ++k_; continue; }
      if (s.type == Segment::Type::kExpr) {
        ExprParser ep(lex(s.body, s.line), s.line);
        auto n = make(Node::Kind::kOutput, s.line);
        n->expr = ep.parse_expression();
        ep.expect_end();
        out.push_back(std::move(n));
        ++k_;
        continue;
      }
      ExprParser ep(lex(s.body, s.line), s.line);
      const std::string kw = ep.expect_name();
      if (ends.count(kw)) return kw;  // the caller consumes it
      ++k_;
      if (kw == "if") {
        out.push_back(parse_if(ep, s.line));
      } else if (kw == "for") {
        out.push_back(parse_for(ep, s.line));
      } else if (kw == "set") {
        out.push_back(parse_set(ep, s.line));
      } else if (kw == "macro") {
        out.push_back(parse_macro(ep, s.line));
      } else if (kw == "break" || kw == "continue") {
        ep.expect_end();
        out.push_back(make(kw == "break" ? Node::Kind::kBreak : Node::Kind::kContinue, s.line));
      } else if (kw == "generation" || kw == "endgeneration") {
        ep.expect_end();  // transformers' assistant-mask markers: no output
      } else {
        HYMOE_THROW(kUnsupported, "chat template line {}: statement '{}' is not supported", s.line, kw);
      }
    }
    HYMOE_CHECK(ends.empty(), kCorruptData, "chat template: missing end tag (one of {})", fmt::join(ends, ", "));
    return "";
  }

 private:
  static NodePtr make(Node::Kind k, int line) {
    auto n = std::make_unique<Node>();
    n->kind = k;
    n->line = line;
    return n;
  }
  // The statement at the current segment after parse_body returned `kw`; consumes it.
  ExprParser take_end_statement() {
    Segment& s = segs_[k_++];
    ExprParser ep(lex(s.body, s.line), s.line);
    ep.expect_name();
    return ep;
  }
  NodePtr parse_if(ExprParser& ep, int line) {
    auto n = make(Node::Kind::kIf, line);
    ExprPtr cond = ep.parse_expression();
    ep.expect_end();
    for (;;) {
      Body body;
      const std::string kw = parse_body(body, {"elif", "else", "endif"});
      n->branches.emplace_back(std::move(cond), std::move(body));
      ExprParser end = take_end_statement();
      if (kw == "elif") {
        cond = end.parse_expression();
        end.expect_end();
        continue;
      }
      end.expect_end();
      if (kw == "else") {
        parse_body(n->else_body, {"endif"});
        take_end_statement().expect_end();
      }
      return n;
    }
  }
  NodePtr parse_for(ExprParser& ep, int line) {
    auto n = make(Node::Kind::kFor, line);
    n->targets.push_back(ep.expect_name());
    while (ep.accept_op(",")) n->targets.push_back(ep.expect_name());
    HYMOE_CHECK(ep.accept_name("in"), kCorruptData, "chat template line {}: expected 'in'", line);
    // The iterable stops before a trailing `if` (the loop filter).
    n->expr = parse_iterable(ep);
    if (ep.accept_name("if")) n->filter = ep.parse_expression();
    HYMOE_CHECK(!ep.is_name("recursive"), kUnsupported, "chat template line {}: recursive loops are not supported", line);
    ep.expect_end();
    const std::string kw = parse_body(n->body, {"else", "endfor"});
    take_end_statement().expect_end();
    if (kw == "else") {
      parse_body(n->else_body, {"endfor"});
      take_end_statement().expect_end();
    }
    return n;
  }
  static ExprPtr parse_iterable(ExprParser& ep) {
    // Parse an or-expression (no ternary): `for x in xs if cond` must leave `if` alone.
    // ExprParser has no public entry for that level, so parse a full expression from a token
    // copy that stops at a top-level `if`.
    return ep.parse_expression_no_ternary();
  }
  NodePtr parse_set(ExprParser& ep, int line) {
    auto n = make(Node::Kind::kSet, line);
    n->targets.push_back(ep.expect_name());
    if (ep.accept_op(".")) n->targets.push_back(ep.expect_name());
    HYMOE_CHECK(ep.accept_op("="), kUnsupported, "chat template line {}: block set is not supported", line);
    n->expr = ep.parse_expression();
    ep.expect_end();
    return n;
  }
  NodePtr parse_macro(ExprParser& ep, int line) {
    auto n = make(Node::Kind::kMacro, line);
    n->macro = std::make_unique<MacroDef>();
    n->macro->name = ep.expect_name();
    ep.expect_op("(");
    while (!ep.accept_op(")")) {
      n->macro->params.push_back(ep.expect_name());
      n->macro->defaults.push_back(ep.accept_op("=") ? ep.parse_expression() : nullptr);
      if (!ep.is_op(")")) ep.expect_op(",");
    }
    ep.expect_end();
    parse_body(n->macro->body, {"endmacro"});
    take_end_statement().expect_end();
    return n;
  }

  std::vector<Segment> segs_;
  size_t k_ = 0;
};

}  // namespace

Template::Template(std::string_view source) {
  StmtParser parser(split_tags(source));
  parser.parse_body(body_, {});
}

Template::~Template() = default;

}  // namespace hymoe::tokenizer::jinja
