// A constrained-decoding grammar of fixed pieces around JSON values (issue 45): what a forced tool
// call needs - a model's tool-call markers (whole tokens, special or not), literal text such as the
// function's name, digit runs, and the arguments as a JSON value checked by a JsonSchemaMachine.
//
// JsonSequenceGrammar  immutable, shared by the sequences of a request: a deterministic automaton
//                      over symbols (bytes, and token ids for pieces that are one token), whose
//                      nodes are one of
//                        branch  transitions on symbols; `accepting`: the output may end here
//                        json    a JSON value of a schema, then the node `next`
//                        digits  min..max ASCII digits, then the node `next`
// JsonSequenceGrammar::Builder  adds pieces from a node; text shares the nodes of common
//                      prefixes (a trie), so alternatives written from one node stay deterministic.
// JsonSequenceMachine  one sequence's state: a small copyable value (no heap) with the feed()
//                      and complete() that JsonTokenMask and the constraint use, plus the token
//                      symbols allowed now (tokens()) and feed_token().
//
// Hand-over: a JSON value ends at its closing byte (the root of a schema is an object) and a digit
// run at the first byte or token that is not a digit, so one token may span pieces ("}\n``` ").
// Inside JSON values, no text in `forbidden` may appear (a tool call's end marker written inside an
// argument string would end the call early when the output is parsed back); each forbidden text's
// first byte appears nowhere else in any of them, so a match restarts only at that byte.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hymoe/server/json_grammar.h"
#include "hymoe/server/json_schema.h"

namespace hymoe::server {

class JsonSequenceGrammar {
 public:
  using NodeId = uint32_t;
  static constexpr int32_t kMaxDigits = 9;
  static constexpr size_t kMaxForbidden = 8;

  enum class Kind : uint8_t { kBranch, kJson, kDigits };
  struct Node {
    Kind kind = Kind::kBranch;
    bool accepting = false;        // kBranch: the output may end here (end-of-sequence allowed)
    uint8_t min = 0, max = 0;      // kDigits: digits in the run
    uint32_t first = 0, count = 0; // kBranch: transitions [first, first + count), sorted by symbol
    int32_t schema = -1;           // kJson: index into schemas
    NodeId next = 0;               // kJson, kDigits: the node after the value
  };
  // symbol: a byte (0..255) or kTokenBase + token id.
  struct Edge {
    uint32_t symbol;
    NodeId to;
  };
  static constexpr uint32_t kTokenBase = 256;

  class Builder {
   public:
    // options: whitespace inside and before JSON values (as in JSON mode).
    explicit Builder(JsonGrammarOptions options = {});

    static constexpr NodeId kStart = 0;
    NodeId add_node();
    // A path spelling `bytes` from `from`; its last byte leads to `to` (a new node when nullopt).
    // Follows transitions already there for the bytes before the last. Returns the node after it.
    NodeId text(NodeId from, std::string_view bytes, std::optional<NodeId> to = std::nullopt);
    // One token (by id) from `from` to `to`.
    NodeId token(NodeId from, int32_t id, std::optional<NodeId> to = std::nullopt);
    // A run of min..max digits (1 <= min <= max <= kMaxDigits) from `from`, which must be a fresh
    // node (no transitions). Returns the node after the run.
    NodeId digits(NodeId from, int32_t min, int32_t max);
    // A JSON value of `schema` (its root is an object) from `from`, a fresh node. Returns the node
    // after the value.
    NodeId json(NodeId from, std::shared_ptr<const JsonSchema> schema);
    void accept(NodeId node);
    // Text that may not appear inside JSON values (at most kMaxForbidden, see above).
    void forbid(std::string text);

    // Throws Error(kInternal) for a nondeterministic or malformed automaton (a builder's bug, not
    // a client's: clients' names are validated before).
    std::shared_ptr<const JsonSequenceGrammar> build();

   private:
    NodeId edge(NodeId from, uint32_t symbol, std::optional<NodeId> to);
    std::shared_ptr<JsonSequenceGrammar> g_;
    std::vector<std::vector<Edge>> edges_;  // per node, unsorted until build()
  };

  const Node& node(NodeId id) const { return nodes_[id]; }
  // All transitions; a branch node's are [first, first + count).
  const Edge* edges() const { return edges_.data(); }
  // The node a symbol leads to from a branch node, or nullopt.
  std::optional<NodeId> step(NodeId from, uint32_t symbol) const;
  const JsonSchema& schema(int32_t i) const { return *schemas_[static_cast<size_t>(i)]; }
  const std::vector<std::string>& forbidden() const { return forbidden_; }
  const JsonGrammarOptions& options() const { return options_; }
  size_t node_count() const { return nodes_.size(); }

 private:
  std::vector<Node> nodes_;
  std::vector<Edge> edges_;
  std::vector<std::shared_ptr<const JsonSchema>> schemas_;
  std::vector<std::string> forbidden_;
  JsonGrammarOptions options_;
};

// A small copyable value; the grammar must outlive it.
class JsonSequenceMachine {
 public:
  explicit JsonSequenceMachine(const JsonSequenceGrammar& grammar);

  // Advances by one byte / all bytes or none; false (state unchanged) when refused.
  bool feed(char byte);
  bool feed(std::string_view bytes);
  // Advances by a whole token; false (state unchanged) when no transition takes it here.
  bool feed_token(int32_t id);
  // Calls f(id) for every token that feed_token() would take now.
  template <class F>
  void tokens(F&& f) const;
  // The output may end here.
  bool complete() const;

  bool operator==(const JsonSequenceMachine&) const = default;

 private:
  bool step(uint8_t c);
  bool enter(JsonSequenceGrammar::NodeId id);  // moves to a node (a json node starts its machine)
  bool leave_digits();                         // a digit run ends before the next symbol

  const JsonSequenceGrammar* g_;
  std::optional<JsonSchemaMachine> json_;  // engaged inside a json node
  JsonSequenceGrammar::NodeId node_ = JsonSequenceGrammar::Builder::kStart;
  uint8_t digits_ = 0;      // kDigits: digits read
  uint8_t match_pos_ = 0;   // kJson: bytes of a forbidden text just matched
  uint8_t match_set_ = 0;   // kJson: the forbidden texts matching those bytes (bit i: forbidden()[i])
};

template <class F>
void JsonSequenceMachine::tokens(F&& f) const {
  const auto& n = g_->node(node_);
  const JsonSequenceGrammar::Node* branch = &n;
  if (n.kind == JsonSequenceGrammar::Kind::kDigits) {
    if (digits_ < n.min) return;
    branch = &g_->node(n.next);  // the run may end before a token
    if (branch->kind != JsonSequenceGrammar::Kind::kBranch) return;
  } else if (n.kind != JsonSequenceGrammar::Kind::kBranch) {
    return;
  }
  const auto* e = g_->edges() + branch->first;
  for (const auto* end = e + branch->count; e != end; ++e) {
    if (e->symbol >= JsonSequenceGrammar::kTokenBase) f(static_cast<int32_t>(e->symbol - JsonSequenceGrammar::kTokenBase));
  }
}

}  // namespace hymoe::server
