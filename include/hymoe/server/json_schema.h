// Structured outputs (OpenAI response_format {"type":"json_schema"}, issue 45): a JSON Schema
// compiled into a byte-level machine that accepts exactly the prefixes of JSON texts that conform
// to it, so a sampler that masks every token the machine refuses (JsonTokenMask) can only write
// conforming output, and can always finish it.
//
// JsonSchema         the compiled schema: immutable nodes, shared by every sequence of a request.
// compile_json_schema  schema document -> JsonSchema; throws JsonSchemaError for anything outside
//                    the subset below, naming the keyword and its JSON-pointer path.
// JsonSchemaMachine  one sequence's state: a stack of (node, progress) frames plus the state of
//                    the scalar being read; a small copyable value with no heap.
//
// The subset (docs/architecture.md, "JSON mode"):
//   type            object, array, string, number, integer, boolean, null, or an array of those
//                   (["string", "null"] is nullable); absent: from the other keywords, else any value
//   properties      written in the order given; `required` ones always, the others may be left
//                   out. No key outside `properties` is written. additionalProperties: false or
//                   true beside properties (nothing extra is written either way); without
//                   properties, true/absent means any keys with any values, a schema means any
//                   keys with values of that schema, false means `{}`.
//   items, minItems, maxItems
//   enum, const     scalar values, written as their compact JSON text
//   anyOf, oneOf    alternatives must start with different bytes (different JSON types; enum and
//                   const alternatives are merged into one), so the first byte picks one
//   $ref            "#", "#/$defs/NAME" or "#/definitions/NAME" (root-level definitions);
//                   recursion allowed, bounded by kMaxDepth open containers
//   ignored         annotations: title, description, $comment, $schema, $id, examples, default,
//                   deprecated, readOnly, writeOnly, format (an annotation by default in 2020-12)
// Anything else (pattern, minimum, minLength, allOf, not, if, prefixItems, ...) is refused.
// The root must be an object. Whitespace: at most JsonGrammarOptions::max_whitespace bytes in a
// run between tokens, as in JSON mode. Numbers: at most 18 integer and 2 exponent digits, so
// every one parses as a finite double (strict parsers refuse 1e400).
//
// Completability: every node knows the fewest containers a value of it must open (min_depth);
// a value, key or array item is begun only where it can be finished within kMaxDepth, and a
// container is closed only once its required parts are there, so every state the machine reaches
// is the prefix of at least one conforming text.
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "hymoe/server/json_grammar.h"
#include "hymoe/server/json_lexer.h"

namespace hymoe::server {

// Bounds on what a client's schema may cost (compile time and memory are linear in them).
struct JsonSchemaLimits {
  int32_t max_nesting = 32;           // levels of subschemas inside each other in the document
  int32_t max_nodes = 1024;           // compiled nodes (each subschema, $ref target and type)
  int32_t max_properties = 64;        // properties of one object (a key is matched with a 64-bit set)
  size_t max_literal_bytes = 1 << 16; // bytes of enum/const values and property names, in all
  int32_t max_items_bound = 1024;     // largest minItems accepted (maxItems above 65535 is unbounded)
};

// A schema outside the subset or malformed. path: JSON pointer into the schema ("" = the root);
// keyword: the offending keyword (or "" when the whole subschema is wrong).
class JsonSchemaError : public std::runtime_error {
 public:
  JsonSchemaError(std::string message, std::string path, std::string keyword, bool unsupported)
      : std::runtime_error(std::move(message)), path_(std::move(path)), keyword_(std::move(keyword)),
        unsupported_(unsupported) {}
  const std::string& path() const { return path_; }
  const std::string& keyword() const { return keyword_; }
  // Valid JSON Schema that the subset does not handle (else: not a valid schema).
  bool unsupported() const { return unsupported_; }

 private:
  std::string path_, keyword_;
  bool unsupported_;
};

class JsonSchema {
 public:
  static constexpr int32_t kMaxDepth = 16;  // containers open at once (the root object counts)
  static constexpr uint8_t kUnreachable = kMaxDepth + 1;  // min_depth of a node no value fits

  enum class Kind : uint8_t {
    kAny,      // any JSON value
    kObject,   // props [first, first + count); map_value >= 0: any keys, values of that node
    kArray,    // items: child; min_items, max_items
    kString,
    kNumber,
    kInteger,
    kEnum,     // literals [first, first + count) of the sorted literal table
    kAnyOf,    // leaf alternatives [first, first + count) of alts (none of them kAnyOf)
    kRef,      // compile time only: resolved to child
  };

  struct Node {
    Kind kind = Kind::kAny;
    uint8_t min_depth = 0;     // fewest containers a value of this node opens (itself included)
    uint16_t required_end = 0; // kObject: 1 + index of the last required property (0: none)
    uint32_t first = 0, count = 0;
    int32_t child = -1;        // kArray: items; kObject: map_value (-1: declared properties only)
    uint32_t min_items = 0, max_items = UINT32_MAX;
    std::bitset<256> first_bytes;  // bytes a value of this node can start with
  };

  struct Property {
    std::string key;  // the key as written: its compact JSON string text, quotes included
    int32_t node;
    bool required;
  };

  // Built-in nodes of every schema.
  static constexpr int32_t kAnyNode = 0, kAnyObjectNode = 1, kAnyArrayNode = 2, kAnyLiteralNode = 3;

  int32_t root() const { return root_; }
  const Node& node(int32_t id) const { return nodes_[static_cast<size_t>(id)]; }
  const Property& property(uint32_t i) const { return props_[i]; }
  std::string_view literal(uint32_t i) const { return literals_[i]; }
  int32_t alternative(uint32_t i) const { return alts_[i]; }
  size_t node_count() const { return nodes_.size(); }
  bool fits(int32_t node_id, int32_t depth) const {
    return depth + nodes_[static_cast<size_t>(node_id)].min_depth <= kMaxDepth;
  }

 private:
  friend class JsonSchemaCompiler;
  std::vector<Node> nodes_;
  std::vector<Property> props_;
  std::vector<std::string> literals_;  // each node's range sorted bytewise, no duplicates
  std::vector<int32_t> alts_;
  int32_t root_ = kAnyObjectNode;
};

// Compiles a schema document (parsed with key order kept: properties are written in that order).
// Walks at most limits.max_nesting levels of it; throws JsonSchemaError.
std::shared_ptr<const JsonSchema> compile_json_schema(const nlohmann::ordered_json& schema,
                                                      const JsonSchemaLimits& limits = {});

// A small copyable value (no heap; the schema it points to must outlive it).
class JsonSchemaMachine {
 public:
  // Throws Error(kInvalidArgument) for options out of range (max_depth is not used: the schema's
  // kMaxDepth bounds nesting).
  explicit JsonSchemaMachine(const JsonSchema& schema, JsonGrammarOptions options = {});

  // Advances by one byte; false (state unchanged) when no conforming text continues so.
  bool feed(char byte);
  // Advances by all bytes or none.
  bool feed(std::string_view bytes);
  // A whole conforming value has been read (only whitespace may follow).
  bool complete() const { return mode_ == Mode::kDone; }
  int32_t depth() const { return depth_; }

  bool operator==(const JsonSchemaMachine&) const = default;

 private:
  enum class Mode : uint8_t {
    kStart, kObjectFirst, kObjectKey, kColon, kValue, kArrayFirst, kAfterValue, kDone,  // structure
    kKey,        // a declared property's key: keys_ the candidates, pos_ bytes matched
    kLiteral,    // an enum value: literals [lit_lo_, lit_hi_), pos_ bytes matched
    kScalar,     // inside a string value or a number: lex_ reads it
    kKeyScalar,  // inside a key of an object without declared properties: lex_ reads it
  };
  struct Frame {
    uint16_t node;
    uint16_t progress;  // object: properties passed (next candidate index); array: items begun
    bool operator==(const Frame&) const = default;
  };

  bool step(uint8_t c);
  bool begin_value(int32_t node, uint8_t c);
  bool end_scalar(uint8_t c);
  bool push(int32_t node, Mode mode);
  uint64_t key_candidates(const Frame& f) const;   // declared properties that may come next
  bool key_possible(const Frame& f) const;
  bool item_possible(const Frame& f) const;
  bool closable(const Frame& f) const;

  const JsonSchema* schema_;
  uint64_t keys_ = 0;            // kKey: candidate properties (bit i: the object's property i)
  uint32_t lit_lo_ = 0, lit_hi_ = 0;
  std::array<Frame, JsonSchema::kMaxDepth> frames_{};
  uint16_t value_node_ = 0;      // the node of the value that kValue begins
  uint16_t pos_ = 0;
  JsonScalarLexer lex_;
  Mode mode_ = Mode::kStart;
  uint8_t depth_ = 0;
  uint8_t ws_run_ = 0, max_ws_ = 4;
};

}  // namespace hymoe::server
