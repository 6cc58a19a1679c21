#include "hymoe/server/json_sequence.h"

#include <algorithm>

#include "hymoe/common/error.h"

namespace hymoe::server {
namespace {

using Kind = JsonSequenceGrammar::Kind;
using NodeId = JsonSequenceGrammar::NodeId;

static_assert(sizeof(JsonSequenceMachine) <= 136, "the token mask copies one machine per byte of a candidate token");

bool is_digit(uint32_t c) { return c >= '0' && c <= '9'; }

}  // namespace

// ---- Builder ----

JsonSequenceGrammar::Builder::Builder(JsonGrammarOptions options) : g_(std::make_shared<JsonSequenceGrammar>()) {
  JsonPrefixMachine check(options);  // throws for options out of range
  (void)check;
  g_->options_ = options;
  add_node();  // kStart
}

NodeId JsonSequenceGrammar::Builder::add_node() {
  g_->nodes_.emplace_back();
  edges_.emplace_back();
  return static_cast<NodeId>(g_->nodes_.size() - 1);
}

NodeId JsonSequenceGrammar::Builder::edge(NodeId from, uint32_t symbol, std::optional<NodeId> to) {
  HYMOE_CHECK(from < g_->nodes_.size() && g_->nodes_[from].kind == Kind::kBranch, kInternal,
              "json sequence: node {} takes no transitions", from);
  auto& out = edges_[from];
  const auto it = std::find_if(out.begin(), out.end(), [&](const Edge& e) { return e.symbol == symbol; });
  if (it != out.end()) {
    HYMOE_CHECK(!to || it->to == *to, kInternal, "json sequence: symbol {} from node {} leads to two nodes", symbol,
                from);
    return it->to;
  }
  const NodeId target = to ? *to : add_node();
  edges_[from].push_back(Edge{symbol, target});  // add_node() may have moved edges_
  return target;
}

NodeId JsonSequenceGrammar::Builder::text(NodeId from, std::string_view bytes, std::optional<NodeId> to) {
  HYMOE_CHECK(!bytes.empty(), kInternal, "json sequence: empty text");
  for (size_t i = 0; i < bytes.size(); ++i) {
    from = edge(from, static_cast<uint8_t>(bytes[i]), i + 1 == bytes.size() ? to : std::nullopt);
  }
  return from;
}

NodeId JsonSequenceGrammar::Builder::token(NodeId from, int32_t id, std::optional<NodeId> to) {
  HYMOE_CHECK(id >= 0, kInternal, "json sequence: token id {}", id);
  return edge(from, kTokenBase + static_cast<uint32_t>(id), to);
}

NodeId JsonSequenceGrammar::Builder::digits(NodeId from, int32_t min, int32_t max) {
  HYMOE_CHECK(1 <= min && min <= max && max <= kMaxDigits, kInternal, "json sequence: digits {}..{}", min, max);
  HYMOE_CHECK(from < g_->nodes_.size() && g_->nodes_[from].kind == Kind::kBranch && edges_[from].empty() &&
                  !g_->nodes_[from].accepting,
              kInternal, "json sequence: a digit run needs a fresh node");
  const NodeId next = add_node();
  Node& n = g_->nodes_[from];
  n.kind = Kind::kDigits;
  n.min = static_cast<uint8_t>(min);
  n.max = static_cast<uint8_t>(max);
  n.next = next;
  return next;
}

NodeId JsonSequenceGrammar::Builder::json(NodeId from, std::shared_ptr<const JsonSchema> schema) {
  HYMOE_CHECK(schema != nullptr, kInternal, "json sequence: no schema");
  HYMOE_CHECK(from < g_->nodes_.size() && g_->nodes_[from].kind == Kind::kBranch && edges_[from].empty() &&
                  !g_->nodes_[from].accepting,
              kInternal, "json sequence: a JSON value needs a fresh node");
  const NodeId next = add_node();
  g_->schemas_.push_back(std::move(schema));
  Node& n = g_->nodes_[from];
  n.kind = Kind::kJson;
  n.schema = static_cast<int32_t>(g_->schemas_.size() - 1);
  n.next = next;
  return next;
}

void JsonSequenceGrammar::Builder::accept(NodeId node) {
  HYMOE_CHECK(node < g_->nodes_.size() && g_->nodes_[node].kind == Kind::kBranch, kInternal,
              "json sequence: node {} cannot end the output", node);
  g_->nodes_[node].accepting = true;
}

void JsonSequenceGrammar::Builder::forbid(std::string text) {
  HYMOE_CHECK(!text.empty() && text.size() < 255 && g_->forbidden_.size() < kMaxForbidden, kInternal,
              "json sequence: forbidden text '{}'", text);
  g_->forbidden_.push_back(std::move(text));
}

std::shared_ptr<const JsonSequenceGrammar> JsonSequenceGrammar::Builder::build() {
  JsonSequenceGrammar& g = *g_;
  for (const auto& f : g.forbidden_) {
    for (const auto& other : g.forbidden_) {
      HYMOE_CHECK(other.find(f[0], 1) == std::string::npos, kInternal,
                  "json sequence: forbidden text '{}' holds another's first byte", other);
    }
  }
  g.edges_.clear();
  for (size_t i = 0; i < g.nodes_.size(); ++i) {
    auto& out = edges_[i];
    std::sort(out.begin(), out.end(), [](const Edge& a, const Edge& b) { return a.symbol < b.symbol; });
    g.nodes_[i].first = static_cast<uint32_t>(g.edges_.size());
    g.nodes_[i].count = static_cast<uint32_t>(out.size());
    g.edges_.insert(g.edges_.end(), out.begin(), out.end());
  }
  for (const Node& n : g.nodes_) {
    if (n.kind != Kind::kDigits) continue;
    // The run ends at the first non-digit: what follows must not start with one.
    const Node& next = g.nodes_[n.next];
    HYMOE_CHECK(next.kind == Kind::kBranch, kInternal, "json sequence: a digit run must be followed by text or tokens");
    for (uint32_t e = next.first; e < next.first + next.count; ++e) {
      HYMOE_CHECK(!is_digit(g.edges_[e].symbol), kInternal, "json sequence: a digit follows a digit run");
    }
  }
  edges_.clear();
  return std::move(g_);
}

std::optional<NodeId> JsonSequenceGrammar::step(NodeId from, uint32_t symbol) const {
  const Node& n = nodes_[from];
  const Edge* begin = edges_.data() + n.first;
  const Edge* end = begin + n.count;
  const Edge* it = std::lower_bound(begin, end, symbol, [](const Edge& e, uint32_t s) { return e.symbol < s; });
  if (it == end || it->symbol != symbol) return std::nullopt;
  return it->to;
}

// ---- Machine ----

JsonSequenceMachine::JsonSequenceMachine(const JsonSequenceGrammar& grammar) : g_(&grammar) {
  enter(JsonSequenceGrammar::Builder::kStart);
}

bool JsonSequenceMachine::enter(NodeId id) {
  node_ = id;
  digits_ = 0;
  match_pos_ = 0;
  match_set_ = 0;
  json_.reset();
  const auto& n = g_->node(id);
  if (n.kind == Kind::kJson) json_.emplace(g_->schema(n.schema), g_->options());
  return true;
}

bool JsonSequenceMachine::leave_digits() {
  const auto& n = g_->node(node_);
  if (digits_ < n.min) return false;
  return enter(n.next);
}

// Atomic (state unchanged on false) except in a digit run, which feed() steps on a copy.
bool JsonSequenceMachine::step(uint8_t c) {
  const auto& n = g_->node(node_);
  switch (n.kind) {
    case Kind::kBranch: {
      const auto to = g_->step(node_, c);
      return to && enter(*to);
    }
    case Kind::kDigits:
      if (is_digit(c)) {
        if (digits_ >= n.max) return false;
        ++digits_;
        return true;
      }
      return leave_digits() && step(c);
    case Kind::kJson: {
      // Forbidden texts: the ones still matching after c, or those starting at c.
      const auto& forbidden = g_->forbidden();
      uint8_t set = 0, pos = 0;
      for (size_t i = 0; i < forbidden.size(); ++i) {
        if ((match_set_ >> i & 1) && static_cast<uint8_t>(forbidden[i][match_pos_]) == c) set |= uint8_t(1u << i);
      }
      if (set != 0) {
        pos = static_cast<uint8_t>(match_pos_ + 1);
      } else {
        for (size_t i = 0; i < forbidden.size(); ++i) {
          if (static_cast<uint8_t>(forbidden[i][0]) == c) set |= uint8_t(1u << i);
        }
        pos = set != 0 ? 1 : 0;
      }
      for (size_t i = 0; i < forbidden.size(); ++i) {
        if ((set >> i & 1) && forbidden[i].size() == pos) return false;
      }
      if (!json_->feed(static_cast<char>(c))) return false;
      match_set_ = set;
      match_pos_ = pos;
      if (json_->complete()) enter(n.next);
      return true;
    }
  }
  return false;
}

bool JsonSequenceMachine::feed(char byte) {
  if (g_->node(node_).kind != Kind::kDigits) return step(static_cast<uint8_t>(byte));
  JsonSequenceMachine next = *this;
  if (!next.step(static_cast<uint8_t>(byte))) return false;
  *this = next;
  return true;
}

bool JsonSequenceMachine::feed(std::string_view bytes) {
  JsonSequenceMachine next = *this;
  for (const char b : bytes) {
    if (!next.step(static_cast<uint8_t>(b))) return false;
  }
  *this = next;
  return true;
}

bool JsonSequenceMachine::feed_token(int32_t id) {
  if (id < 0) return false;
  JsonSequenceMachine next = *this;
  if (g_->node(next.node_).kind == Kind::kDigits && !next.leave_digits()) return false;
  if (g_->node(next.node_).kind != Kind::kBranch) return false;
  const auto to = g_->step(next.node_, JsonSequenceGrammar::kTokenBase + static_cast<uint32_t>(id));
  if (!to) return false;
  next.enter(*to);
  *this = next;
  return true;
}

bool JsonSequenceMachine::complete() const {
  const auto& n = g_->node(node_);
  if (n.kind == Kind::kDigits) return digits_ >= n.min && g_->node(n.next).accepting;
  return n.kind == Kind::kBranch && n.accepting;
}

}  // namespace hymoe::server
