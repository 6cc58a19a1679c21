// Syntax tree of the Jinja subset (built by jinja_parser.cpp, run by jinja_render.cpp).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja_value.h"

namespace hymoe::tokenizer::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral, kVar, kAttr, kIndex, kSlice, kCall, kFilter, kTest, kNot, kNeg, kBinary,
    kTernary, kList, kDict
  };
  Kind kind;
  int line = 0;
  Value literal;             // kLiteral
  std::string name;          // kVar, kAttr, kFilter, kTest, kBinary operator
  bool negate = false;       // kTest: `is not`
  std::vector<ExprPtr> kids; // operands; kSlice: obj, start, stop, step (null = absent);
                             // kCall: callee, args...; kFilter/kTest: subject, args...;
                             // kDict: key, value, key, value...
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // kCall, kFilter
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct MacroDef {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // aligned with params; null = required
  Body body;
};

struct Node {
  enum class Kind { kText, kOutput, kIf, kFor, kSet, kMacro, kBreak, kContinue };
  Kind kind;
  int line = 0;
  std::string text;                                  // kText
  ExprPtr expr;                                      // kOutput, kSet value, kFor iterable
  std::vector<std::pair<ExprPtr, Body>> branches;    // kIf: (condition, body)...
  Body else_body;                                    // kIf, kFor
  std::vector<std::string> targets;                  // kFor loop variables; kSet: name or ns, attr
  ExprPtr filter;                                    // kFor: `if` condition
  Body body;                                         // kFor
  std::unique_ptr<MacroDef> macro;                   // kMacro
};

}  // namespace hymoe::tokenizer::jinja
