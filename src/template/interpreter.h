// Interpreter: executes a parsed template over Values, with Jinja2's scoping (for loops and
// macros open scopes, `if` does not), loop variables, macros, call/filter blocks and limits.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/ast.h"
#include "template/value.h"

namespace ferry::tmpl {

// Bounds that keep hostile templates (and the fuzzer) from hanging or exhausting memory;
// exceeding one is a ResourceExhausted error, never a crash.
struct RenderLimits {
  int max_call_depth = 100;               // nested macro calls (CPython's recursion limit is ~1000 frames)
  uint64_t max_steps = 50'000'000;        // statements + loop iterations + expression evaluations
  size_t max_output_bytes = 64u << 20;    // rendered text and any single string
  int max_nesting = 1000;                 // nested Eval/Exec frames in total (bounds stack use)
};

struct Scope {
  std::vector<std::pair<std::string, Value>> vars;
  std::shared_ptr<Scope> parent;

  const Value* Lookup(const std::string& name) const;
  void Assign(const std::string& name, Value v);
};

class Interpreter {
 public:
  // `globals`: a dict of names visible everywhere (context variables and global functions).
  Interpreter(const Value& globals, const RenderLimits& limits);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;
  std::string Render(const Body& body);

  Value Eval(const Expr& e, const std::shared_ptr<Scope>& scope);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  Flow Exec(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out);
  Flow ExecStmt(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out);
  void ExecFor(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out);
  Value MakeMacro(const Stmt& s, const std::shared_ptr<Scope>& scope, const std::string& name);
  Value CallMacro(const Stmt& s, const std::shared_ptr<Scope>& closure, CallArgs& args);
  Value EvalCall(const Expr& e, const std::shared_ptr<Scope>& scope);
  Value EvalBinary(const std::string& op, const Value& a, const Value& b);
  CallArgs EvalArgs(const Expr& e, size_t first, const std::shared_ptr<Scope>& scope);
  Value ApplyFilterExpr(const Expr& f, Value operand, const std::shared_ptr<Scope>& scope);
  void Step();
  void Append(std::string& out, const std::string& s);

  std::shared_ptr<Scope> root_;
  RenderLimits limits_;
  uint64_t steps_ = 0;
  int call_depth_ = 0;
  int nesting_ = 0;
  std::vector<Value> assigned_namespaces_;  // cleared at the end (see ~Interpreter)
};

// Assigns `value` to `targets` (one name, or tuple unpacking of a list/tuple).
void AssignTargets(Scope& scope, const std::vector<std::string>& targets, const Value& value);

}  // namespace ferry::tmpl
