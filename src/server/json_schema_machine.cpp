// JsonSchemaMachine (json_schema.h): JSON's byte grammar, as in JsonPrefixMachine, with each
// structural choice asked of the schema node on top of the frame stack.
#include <algorithm>
#include <bit>

#include "hymoe/common/error.h"
#include "hymoe/server/json_schema.h"

namespace hymoe::server {
namespace {

using Kind = JsonSchema::Kind;

static_assert(sizeof(JsonSchemaMachine) <= 104, "the token mask copies one machine per byte of a candidate token");

// Numbers stay finite in strict parsers (nlohmann refuses 1e400): at most 18 integer digits (an
// int64 holds them) and 2 exponent digits, so |x| < 1e118.
constexpr uint8_t kMaxIntDigits = 18;
constexpr uint8_t kMaxExpDigits = 2;

bool is_space(uint8_t c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

}  // namespace

JsonSchemaMachine::JsonSchemaMachine(const JsonSchema& schema, JsonGrammarOptions options) : schema_(&schema) {
  HYMOE_CHECK(options.max_whitespace >= 0 && options.max_whitespace <= 255, kInvalidArgument,
              "json schema machine: max_whitespace {} not in [0, 255]", options.max_whitespace);
  max_ws_ = static_cast<uint8_t>(options.max_whitespace);
}

bool JsonSchemaMachine::feed(char byte) {
  JsonSchemaMachine next = *this;
  if (!next.step(static_cast<uint8_t>(byte))) return false;
  *this = next;
  return true;
}

bool JsonSchemaMachine::feed(std::string_view bytes) {
  JsonSchemaMachine next = *this;
  for (char b : bytes) {
    if (!next.step(static_cast<uint8_t>(b))) return false;
  }
  *this = next;
  return true;
}

uint64_t JsonSchemaMachine::key_candidates(const Frame& f) const {
  const JsonSchema::Node& n = schema_->node(f.node);
  uint64_t mask = 0;
  for (uint32_t i = f.progress; i < n.count; ++i) {
    const JsonSchema::Property& p = schema_->property(n.first + i);
    if (schema_->fits(p.node, depth_)) mask |= uint64_t{1} << i;
    if (p.required) break;  // a required property cannot be skipped (it fits: min_depth says so)
  }
  return mask;
}

bool JsonSchemaMachine::key_possible(const Frame& f) const {
  const JsonSchema::Node& n = schema_->node(f.node);
  if (n.count > 0) return key_candidates(f) != 0;
  return n.child >= 0 && schema_->fits(n.child, depth_);
}

bool JsonSchemaMachine::item_possible(const Frame& f) const {
  const JsonSchema::Node& n = schema_->node(f.node);
  return f.progress < n.max_items && schema_->fits(n.child, depth_);
}

bool JsonSchemaMachine::closable(const Frame& f) const {
  const JsonSchema::Node& n = schema_->node(f.node);
  return n.kind == Kind::kObject ? f.progress >= n.required_end : f.progress >= n.min_items;
}

bool JsonSchemaMachine::push(int32_t node, Mode mode) {
  if (depth_ >= JsonSchema::kMaxDepth) return false;  // not reached: fits() was asked before
  frames_[depth_] = Frame{static_cast<uint16_t>(node), 0};
  ++depth_;
  mode_ = mode;
  return true;
}

bool JsonSchemaMachine::begin_value(int32_t id, uint8_t c) {
  const JsonSchema::Node* n = &schema_->node(id);
  if (n->kind == Kind::kAnyOf) {
    if (!n->first_bytes[c]) return false;
    const uint32_t first = n->first, count = n->count;
    for (uint32_t i = 0; i < count; ++i) {
      const int32_t alt = schema_->alternative(first + i);
      if (schema_->node(alt).first_bytes[c]) {  // the only one (leaves start apart)
        id = alt;
        n = &schema_->node(id);
        break;
      }
    }
  }
  if (n->kind == Kind::kAny) {
    if (c == '{') id = JsonSchema::kAnyObjectNode;
    else if (c == '[') id = JsonSchema::kAnyArrayNode;
    else if (c == 't' || c == 'f' || c == 'n') id = JsonSchema::kAnyLiteralNode;
    n = &schema_->node(id);
  }
  if (!schema_->fits(id, depth_)) return false;
  switch (n->kind) {
    case Kind::kObject: return c == '{' && push(id, Mode::kObjectFirst);
    case Kind::kArray: return c == '[' && push(id, Mode::kArrayFirst);
    case Kind::kString:
      if (c != '"') return false;
      mode_ = Mode::kScalar;
      lex_.begin_string();
      return true;
    case Kind::kAny:  // a string or a number (containers and literals were mapped above)
    case Kind::kNumber:
    case Kind::kInteger:
      if (n->kind == Kind::kAny && c == '"') {
        mode_ = Mode::kScalar;
        lex_.begin_string();
        return true;
      }
      if (!lex_.begin_number(c, n->kind == Kind::kInteger)) return false;
      mode_ = Mode::kScalar;
      return true;
    case Kind::kEnum:
      mode_ = Mode::kLiteral;
      lit_lo_ = n->first;
      lit_hi_ = n->first + n->count;
      pos_ = 0;
      return step(c);
    case Kind::kAnyOf:
    case Kind::kRef:
      return false;
  }
  return false;
}

// A number or literal that may end at the first byte that does not extend it: that byte is then
// read after the value.
bool JsonSchemaMachine::end_scalar(uint8_t c) {
  mode_ = Mode::kAfterValue;
  return step(c);
}

bool JsonSchemaMachine::step(uint8_t c) {
  if (mode_ <= Mode::kDone && is_space(c)) {
    if (ws_run_ >= max_ws_) return false;
    ++ws_run_;
    return true;
  }
  if (mode_ <= Mode::kDone) ws_run_ = 0;
  switch (mode_) {
    case Mode::kStart:
      return begin_value(schema_->root(), c);
    case Mode::kObjectFirst:
    case Mode::kObjectKey: {
      const Frame& f = frames_[depth_ - 1];
      if (c == '}' && mode_ == Mode::kObjectFirst) break;  // close below
      if (c != '"') return false;
      const JsonSchema::Node& n = schema_->node(f.node);
      if (n.count > 0) {
        keys_ = key_candidates(f);
        if (keys_ == 0) return false;
        mode_ = Mode::kKey;
        pos_ = 1;
        return true;
      }
      if (!key_possible(f)) return false;
      mode_ = Mode::kKeyScalar;
      lex_.begin_string();
      return true;
    }
    case Mode::kColon:
      if (c != ':') return false;
      mode_ = Mode::kValue;
      return true;
    case Mode::kArrayFirst: {
      Frame& f = frames_[depth_ - 1];
      if (c == ']') break;
      if (!item_possible(f)) return false;
      if (f.progress < UINT16_MAX) ++f.progress;
      return begin_value(schema_->node(f.node).child, c);
    }
    case Mode::kValue:
      return begin_value(value_node_, c);
    case Mode::kAfterValue: {
      Frame& f = frames_[depth_ - 1];
      const JsonSchema::Node& n = schema_->node(f.node);
      if (c == ',') {
        if (n.kind == Kind::kObject) {
          if (!key_possible(f)) return false;
          mode_ = Mode::kObjectKey;
          return true;
        }
        if (!item_possible(f)) return false;
        if (f.progress < UINT16_MAX) ++f.progress;
        value_node_ = static_cast<uint16_t>(n.child);
        mode_ = Mode::kValue;
        return true;
      }
      if (c == '}' || c == ']') break;
      return false;
    }
    case Mode::kDone:
      return false;

    case Mode::kKey: {
      Frame& f = frames_[depth_ - 1];
      const JsonSchema::Node& n = schema_->node(f.node);
      uint64_t next = 0;
      for (uint64_t m = keys_; m != 0; m &= m - 1) {
        const int i = std::countr_zero(m);
        const std::string_view key = schema_->property(n.first + static_cast<uint32_t>(i)).key;
        if (key.size() > pos_ && static_cast<uint8_t>(key[pos_]) == c) next |= uint64_t{1} << i;
      }
      if (next == 0) return false;
      keys_ = next;
      ++pos_;
      // Keys are JSON string texts, so none is a prefix of another: a whole one is the only match.
      const int i = std::countr_zero(next);
      const JsonSchema::Property& p = schema_->property(n.first + static_cast<uint32_t>(i));
      if (p.key.size() == pos_) {
        f.progress = static_cast<uint16_t>(i + 1);
        value_node_ = static_cast<uint16_t>(p.node);
        mode_ = Mode::kColon;
      }
      return true;
    }
    case Mode::kLiteral: {
      // Candidates share their first pos_ bytes and are sorted: those continuing with c are a run
      // (one a prefix of the others, a number such as 1 beside 12, comes first).
      auto rank = [&](uint32_t i) {
        const std::string_view l = schema_->literal(i);
        return l.size() > pos_ ? static_cast<int>(static_cast<uint8_t>(l[pos_])) + 1 : 0;
      };
      auto first_at_least = [&](int r) {  // binary search: ranks rise along the run
        uint32_t lo = lit_lo_, hi = lit_hi_;
        while (lo < hi) {
          const uint32_t mid = lo + (hi - lo) / 2;
          if (rank(mid) < r) lo = mid + 1;
          else hi = mid;
        }
        return lo;
      };
      const uint32_t a = first_at_least(c + 1), e = first_at_least(c + 2);
      if (a == e) {
        if (schema_->literal(lit_lo_).size() == pos_) return end_scalar(c);
        return false;
      }
      lit_lo_ = a;
      lit_hi_ = e;
      ++pos_;
      if (e - a == 1 && schema_->literal(a).size() == pos_) mode_ = Mode::kAfterValue;
      return true;
    }

    case Mode::kScalar:
    case Mode::kKeyScalar:
      switch (lex_.step(c, JsonScalarLexer::NumberRules{kMaxIntDigits, kMaxExpDigits})) {
        case JsonScalarLexer::Result::kMore: return true;
        case JsonScalarLexer::Result::kEnd:  // a string's closing quote
          if (mode_ == Mode::kKeyScalar) {
            value_node_ = static_cast<uint16_t>(schema_->node(frames_[depth_ - 1].node).child);
            mode_ = Mode::kColon;
          } else {
            mode_ = Mode::kAfterValue;
          }
          return true;
        case JsonScalarLexer::Result::kEndBefore: return end_scalar(c);
        case JsonScalarLexer::Result::kRefused: return false;
      }
      return false;
  }
  // A closing bracket: it must match the innermost container, whose required parts are there.
  if (depth_ == 0) return false;
  const Frame& f = frames_[depth_ - 1];
  const bool object = schema_->node(f.node).kind == Kind::kObject;
  if ((c == '}') != object || !closable(f)) return false;
  --depth_;
  mode_ = depth_ == 0 ? Mode::kDone : Mode::kAfterValue;
  return true;
}

}  // namespace hymoe::server
