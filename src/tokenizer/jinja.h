// A Jinja interpreter for the subset that Hugging Face chat templates use, with transformers'
// environment: trim_blocks and lstrip_blocks on, loop controls (break/continue), the
// {% generation %} marker as a no-op, raise_exception(), namespace(), range(), strftime_now().
//
// Supported: {{ }}, {% if/elif/else %}, {% for a[, b] in x [if cond] %} with loop.* and
// {% else %}, {% set x = ... %} and {% set ns.attr = ... %}, {% macro %} and calls, {# #},
// whitespace control (-, +); expressions with Python semantics: literals, lists, dicts, tuples,
// attributes, subscripts, slices, calls, filters, tests, `in`, `not in`, `is [not]`, `~`,
// arithmetic, comparisons, and/or/not, `a if c else b`; string, list and dict methods.
// Anything else is rejected when parsing (kUnsupported with the line) or rendering.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "jinja_value.h"

namespace hymoe::tokenizer::jinja {

struct Node;

class Template {
 public:
  // Throws hymoe::Error: kCorruptData for a syntax error, kUnsupported for an unknown
  // statement, filter or test (with the line number).
  explicit Template(std::string_view source);
  ~Template();
  Template(const Template&) = delete;
  Template& operator=(const Template&) = delete;

  // Renders with the given top-level variables (a dict). Thread-safe (const).
  // raise_exception(msg) throws kInvalidArgument with msg.
  std::string render(const Value& globals) const;

 private:
  std::vector<std::unique_ptr<Node>> body_;
};

}  // namespace hymoe::tokenizer::jinja
