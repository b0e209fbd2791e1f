// AST: the expression and statement nodes the parser builds and the interpreter walks.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/value.h"

namespace ferry::tmpl {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // value
    kName,      // name
    kList,      // args = items
    kTuple,     // args = items
    kDict,      // args = key0, value0, key1, value1, ...
    kGetAttr,   // args[0].name
    kGetItem,   // args[0][args[1]]
    kSlice,     // args[0][args[1]:args[2]:args[3]] (null = omitted)
    kCall,      // args[0](args[1..], kwargs)
    kFilter,    // args[0] | name(args[1..], kwargs); args[0] null inside a filter block
    kTest,      // args[0] is [not] name(args[1..], kwargs)
    kNot,       // not args[0]
    kNeg,       // -args[0]
    kPos,       // +args[0]
    kBinary,    // args[0] <name> args[1]: + - * / // % ** ~
    kCompare,   // args[0] ops[0] args[1] ops[1] args[2] ... (== != < > <= >= in notin)
    kAnd,
    kOr,
    kCondExpr,  // args[1] if args[0] else args[2] (args[2] may be null)
  };
  Kind kind;
  int line = 0;
  Value value;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // conds[i] -> bodies[i]; else_body
    kFor,          // for targets in expr [if cond]: body, else_body
    kSet,          // targets (or ns_target.attr) = expr
    kSetBlock,     // targets[0] = rendered body | filter (filter may be null)
    kMacro,        // name(params) body
    kCallBlock,    // {% call(params) expr %} body
    kFilterBlock,  // {% filter filter %} body
    kBreak,
    kContinue,
    kScope,        // {% generation %} body: rendered as is
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  ExprPtr filter;
  std::vector<std::string> targets;
  std::string attr;  // kSet on a namespace: targets[0].attr
  std::vector<ExprPtr> conds;
  std::vector<Body> bodies;
  Body body;
  Body else_body;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro / caller parameters
};

}  // namespace ferry::tmpl
