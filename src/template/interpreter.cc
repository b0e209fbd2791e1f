// Interpreter: statements, expressions, scoping, loops and macros.
#include "template/interpreter.h"

#include "template/builtins.h"
#include "template/error.h"

namespace ferry::tmpl {

const Value* Scope::Lookup(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent.get())
    for (const auto& [k, v] : s->vars)
      if (k == name) return &v;
  return nullptr;
}

void Scope::Assign(const std::string& name, Value v) {
  for (auto& [k, x] : vars)
    if (k == name) {
      x = std::move(v);
      return;
    }
  vars.emplace_back(name, std::move(v));
}

void AssignTargets(Scope& scope, const std::vector<std::string>& targets, const Value& value) {
  if (targets.size() == 1) {
    scope.Assign(targets[0], value);
    return;
  }
  List items = value.is_list() ? value.list() : Iterate(value);
  if (items.size() != targets.size())
    Raise("ValueError", "{} values to unpack (expected {}, got {})", items.size() < targets.size() ? "not enough" : "too many",
          targets.size(), items.size());
  for (size_t i = 0; i < targets.size(); ++i) scope.Assign(targets[i], items[i]);
}

Interpreter::Interpreter(const Value& globals, const RenderLimits& limits) : limits_(limits) {
  auto g = std::make_shared<Scope>();
  for (const auto& [k, v] : globals.dict().items) g->Assign(ToStr(k), v);
  root_ = std::make_shared<Scope>();
  root_->parent = g;
}

void Interpreter::Step() {
  if (++steps_ > limits_.max_steps)
    throw TemplateError("ResourceExhausted", "template exceeded the step limit (" + std::to_string(limits_.max_steps) + ")",
                        StatusCode::kResourceExhausted);
}

void Interpreter::Append(std::string& out, const std::string& s) {
  if (out.size() + s.size() > limits_.max_output_bytes)
    throw TemplateError("ResourceExhausted", "template output exceeds " + std::to_string(limits_.max_output_bytes) + " bytes",
                        StatusCode::kResourceExhausted);
  out += s;
}

Interpreter::~Interpreter() {
  // Namespace attributes are the only mutation a template can make, hence the only way to
  // build a reference cycle (`set ns.me = ns`); emptying them frees any such cycle.
  for (Value& ns : assigned_namespaces_) ns.dict().items.clear();
}

std::string Interpreter::Render(const Body& body) {
  SetMaxStringBytes(limits_.max_output_bytes);
  std::string out;
  Exec(body, root_, out);
  return out;
}

Interpreter::Flow Interpreter::Exec(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out) {
  for (const auto& s : body) {
    Flow f = ExecStmt(*s, scope, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

namespace {
// Counts one level of interpreter recursion; throws past the limit.
struct NestGuard {
  NestGuard(int& n, int limit) : n(n) {
    if (++n > limit)
      throw TemplateError("ResourceExhausted", "template evaluation nests deeper than " + std::to_string(limit),
                          StatusCode::kResourceExhausted);
  }
  ~NestGuard() { --n; }
  int& n;
};
}  // namespace

Interpreter::Flow Interpreter::ExecStmt(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out) {
  Step();
  NestGuard nest(nesting_, limits_.max_nesting);
  switch (s.kind) {
    case Stmt::Kind::kText: Append(out, s.text); break;
    case Stmt::Kind::kOutput: Append(out, ToStr(Eval(*s.expr, scope))); break;
    case Stmt::Kind::kIf:
      for (size_t i = 0; i < s.conds.size(); ++i)
        if (Eval(*s.conds[i], scope).Truthy()) return Exec(s.bodies[i], scope, out);
      return Exec(s.else_body, scope, out);
    case Stmt::Kind::kFor: ExecFor(s, scope, out); break;
    case Stmt::Kind::kSet: {
      Value v = Eval(*s.expr, scope);
      if (!s.attr.empty()) {
        const Value* ns = scope->Lookup(s.targets[0]);
        if (!ns || !ns->is_namespace()) Raise("TemplateRuntimeError", "cannot assign attribute on non-namespace object");
        ns->Set(s.attr, std::move(v));
        if (assigned_namespaces_.empty() || assigned_namespaces_.back().identity() != ns->identity())
          assigned_namespaces_.push_back(*ns);
      } else {
        AssignTargets(*scope, s.targets, v);
      }
      break;
    }
    case Stmt::Kind::kSetBlock: {
      std::string body;
      auto inner = std::make_shared<Scope>();
      inner->parent = scope;
      Exec(s.body, inner, body);
      Value v = Value::Str(std::move(body));
      if (s.filter) v = ApplyFilterExpr(*s.filter, v, scope);
      scope->Assign(s.targets[0], v);
      break;
    }
    case Stmt::Kind::kMacro: scope->Assign(s.text, MakeMacro(s, scope, s.text)); break;
    case Stmt::Kind::kCallBlock: {
      Value caller = MakeMacro(s, scope, "caller");
      const Expr& call = *s.expr;
      Value fn = Eval(*call.args[0], scope);
      if (!fn.is_callable()) {
        if (fn.is_undefined()) RaiseUndefined(fn);
        Raise("TypeError", "'{}' object is not callable", fn.TypeName());
      }
      CallArgs args = EvalArgs(call, 1, scope);
      args.kw.emplace_back("caller", caller);
      Append(out, ToStr(fn.callable().fn(args)));
      break;
    }
    case Stmt::Kind::kFilterBlock: {
      std::string body;
      Exec(s.body, scope, body);
      Append(out, ToStr(ApplyFilterExpr(*s.filter, Value::Str(std::move(body)), scope)));
      break;
    }
    case Stmt::Kind::kBreak: return Flow::kBreak;
    case Stmt::Kind::kContinue: return Flow::kContinue;
    case Stmt::Kind::kScope: return Exec(s.body, scope, out);
  }
  return Flow::kNormal;
}

void Interpreter::ExecFor(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out) {
  Value iterable = Eval(*s.expr, scope);
  List items = Iterate(iterable);
  auto loop_scope = std::make_shared<Scope>();
  loop_scope->parent = scope;
  if (s.cond) {
    List kept;
    for (const Value& item : items) {
      Step();
      AssignTargets(*loop_scope, s.targets, item);
      if (Eval(*s.cond, loop_scope).Truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    Step();
    // Each iteration starts from a fresh scope: a set in one iteration is not seen by the next.
    loop_scope = std::make_shared<Scope>();
    loop_scope->parent = scope;
    Value loop = Value::NewDict(Value::Flavor::kLoop);
    loop.Set("index0", Value::Int(i));
    loop.Set("index", Value::Int(i + 1));
    loop.Set("revindex0", Value::Int(n - i - 1));
    loop.Set("revindex", Value::Int(n - i));
    loop.Set("first", Value::Bool(i == 0));
    loop.Set("last", Value::Bool(i == n - 1));
    loop.Set("length", Value::Int(n));
    loop.Set("depth", Value::Int(1));
    loop.Set("depth0", Value::Int(0));
    if (i > 0) loop.Set("previtem", items[static_cast<size_t>(i - 1)]);
    if (i + 1 < n) loop.Set("nextitem", items[static_cast<size_t>(i + 1)]);
    loop.Set("cycle", Value::Function("loop.cycle", [i](CallArgs& a) -> Value {
               if (a.pos.empty()) Raise("TypeError", "no items for cycling given");
               return a.pos[static_cast<size_t>(i) % a.pos.size()];
             }));
    loop_scope->Assign("loop", loop);
    AssignTargets(*loop_scope, s.targets, items[static_cast<size_t>(i)]);
    if (Exec(s.body, loop_scope, out) == Flow::kBreak) break;
  }
  if (n == 0) {
    auto else_scope = std::make_shared<Scope>();
    else_scope->parent = scope;
    Exec(s.else_body, else_scope, out);
  }
}

Value Interpreter::MakeMacro(const Stmt& s, const std::shared_ptr<Scope>& scope, const std::string& name) {
  const Stmt* node = &s;
  // Weak: the macro is stored in the very scope it closes over, and a shared_ptr would make a
  // cycle. A macro smuggled out of its scope (via a namespace) and called later is an error.
  std::weak_ptr<Scope> weak = scope;
  return Value::Function(name, [this, node, weak](CallArgs& a) {
    std::shared_ptr<Scope> closure = weak.lock();
    if (!closure) RaiseUnsupported("calling macro '{}' outside the scope that defined it", node->text);
    return CallMacro(*node, closure, a);
  });
}

Value Interpreter::CallMacro(const Stmt& s, const std::shared_ptr<Scope>& closure, CallArgs& args) {
  if (call_depth_ >= limits_.max_call_depth)
    throw TemplateError("ResourceExhausted", "macro calls nest deeper than " + std::to_string(limits_.max_call_depth),
                        StatusCode::kResourceExhausted);
  struct DepthGuard {
    int& d;
    ~DepthGuard() { --d; }
  } guard{++call_depth_};
  auto scope = std::make_shared<Scope>();
  scope->parent = closure;
  const auto& params = s.params;
  std::vector<bool> bound(params.size(), false);
  List varargs;
  for (size_t i = 0; i < args.pos.size(); ++i) {
    if (i < params.size()) {
      scope->Assign(params[i].first, args.pos[i]);
      bound[i] = true;
    } else {
      varargs.push_back(args.pos[i]);
    }
  }
  Value kwargs = Value::NewDict();
  for (auto& [k, v] : args.kw) {
    size_t i = 0;
    while (i < params.size() && params[i].first != k) ++i;
    if (i < params.size()) {
      if (bound[i]) Raise("TypeError", "macro '{}' got multiple values for argument '{}'", s.text, k);
      scope->Assign(k, v);
      bound[i] = true;
    } else if (k == "caller") {
      scope->Assign("caller", v);
    } else {
      kwargs.Set(k, v);
    }
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (bound[i]) continue;
    scope->Assign(params[i].first, params[i].second ? Eval(*params[i].second, scope)
                                                    : Value::Undefined("parameter '" + params[i].first + "' was not provided"));
  }
  scope->Assign("varargs", Value::NewTuple(std::move(varargs)));
  scope->Assign("kwargs", kwargs);
  std::string out;
  Exec(s.body, scope, out);
  return Value::Str(std::move(out));
}

CallArgs Interpreter::EvalArgs(const Expr& e, size_t first, const std::shared_ptr<Scope>& scope) {
  CallArgs a;
  for (size_t i = first; i < e.args.size(); ++i) a.pos.push_back(Eval(*e.args[i], scope));
  for (const auto& [k, v] : e.kwargs) a.kw.emplace_back(k, Eval(*v, scope));
  return a;
}

Value Interpreter::ApplyFilterExpr(const Expr& f, Value operand, const std::shared_ptr<Scope>& scope) {
  // A chain `| a | b` is nested with the innermost operand null.
  if (f.args[0]) operand = ApplyFilterExpr(*f.args[0], std::move(operand), scope);
  CallArgs a = EvalArgs(f, 1, scope);
  return ApplyFilter(f.name, operand, a);
}

Value Interpreter::EvalCall(const Expr& e, const std::shared_ptr<Scope>& scope) {
  Value fn = Eval(*e.args[0], scope);
  if (!fn.is_callable()) {
    if (fn.is_undefined()) RaiseUndefined(fn);
    Raise("TypeError", "'{}' object is not callable", fn.TypeName());
  }
  CallArgs a = EvalArgs(e, 1, scope);
  return fn.callable().fn(a);
}

Value Interpreter::Eval(const Expr& e, const std::shared_ptr<Scope>& scope) {
  Step();
  NestGuard nest(nesting_, limits_.max_nesting);
  switch (e.kind) {
    case Expr::Kind::kLiteral: return e.value;
    case Expr::Kind::kName: {
      const Value* v = scope->Lookup(e.name);
      return v ? *v : Value::Undefined("'" + e.name + "' is undefined");
    }
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      List items;
      for (const auto& a : e.args) items.push_back(Eval(*a, scope));
      return Value::NewList(std::move(items), e.kind == Expr::Kind::kTuple ? Value::Flavor::kTuple : Value::Flavor::kPlain);
    }
    case Expr::Kind::kDict: {
      Value d = Value::NewDict();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        Value k = Eval(*e.args[i], scope);
        if (k.is_list() && !k.is_tuple()) Raise("TypeError", "unhashable type: 'list'");
        if (k.is_dict()) Raise("TypeError", "unhashable type: 'dict'");
        d.Set(k, Eval(*e.args[i + 1], scope));
      }
      return d;
    }
    case Expr::Kind::kGetAttr: {
      Value obj = Eval(*e.args[0], scope);
      if (obj.is_undefined()) RaiseUndefined(obj);
      return GetAttr(obj, e.name);
    }
    case Expr::Kind::kGetItem: {
      Value obj = Eval(*e.args[0], scope);
      if (obj.is_undefined()) RaiseUndefined(obj);
      return GetItem(obj, Eval(*e.args[1], scope));
    }
    case Expr::Kind::kSlice: {
      Value obj = Eval(*e.args[0], scope);
      if (obj.is_undefined()) RaiseUndefined(obj);
      Value parts[3];
      for (int i = 0; i < 3; ++i) parts[i] = e.args[1 + i] ? Eval(*e.args[1 + i], scope) : Value::None();
      return Slice(obj, parts[0], parts[1], parts[2]);
    }
    case Expr::Kind::kCall: return EvalCall(e, scope);
    case Expr::Kind::kFilter: {
      Value operand = e.args[0] ? Eval(*e.args[0], scope) : Value::Undefined();
      CallArgs a = EvalArgs(e, 1, scope);
      return ApplyFilter(e.name, operand, a);
    }
    case Expr::Kind::kTest: {
      Value operand = Eval(*e.args[0], scope);
      CallArgs a = EvalArgs(e, 1, scope);
      return Value::Bool(ApplyTest(e.name, operand, a) != e.negated);
    }
    case Expr::Kind::kNot: return Value::Bool(!Eval(*e.args[0], scope).Truthy());
    case Expr::Kind::kNeg:
    case Expr::Kind::kPos: {
      Value v = Eval(*e.args[0], scope);
      if (v.is_undefined()) RaiseUndefined(v);
      if (!v.is_number()) Raise("TypeError", "bad operand type for unary {}: '{}'", e.kind == Expr::Kind::kNeg ? "-" : "+", v.TypeName());
      if (e.kind == Expr::Kind::kPos) return v.is_bool() ? Value::Int(v.int_value()) : v;
      if (v.is_float()) return Value::Float(-v.float_value());
      if (v.int_value() == INT64_MIN) RaiseUnsupported("integer overflow (Python integers are unbounded)");
      return Value::Int(-v.int_value());
    }
    case Expr::Kind::kBinary: return EvalBinary(e.name, Eval(*e.args[0], scope), Eval(*e.args[1], scope));
    case Expr::Kind::kCompare: {
      Value left = Eval(*e.args[0], scope);
      for (size_t i = 0; i < e.ops.size(); ++i) {
        Value right = Eval(*e.args[i + 1], scope);
        const std::string& op = e.ops[i];
        bool r;
        if (op == "==") {
          r = Equals(left, right);
        } else if (op == "!=") {
          r = !Equals(left, right);
        } else if (op == "in" || op == "notin") {
          CallArgs a;
          a.pos.push_back(right);
          r = ApplyTest("in", left, a) == (op == "in");
        } else {
          int c = Compare(left, right);
          r = op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0;
        }
        if (!r) return Value::Bool(false);
        left = std::move(right);
      }
      return Value::Bool(true);
    }
    case Expr::Kind::kAnd: {
      Value a = Eval(*e.args[0], scope);
      return a.Truthy() ? Eval(*e.args[1], scope) : a;
    }
    case Expr::Kind::kOr: {
      Value a = Eval(*e.args[0], scope);
      return a.Truthy() ? a : Eval(*e.args[1], scope);
    }
    case Expr::Kind::kCondExpr: {
      if (Eval(*e.args[0], scope).Truthy()) return Eval(*e.args[1], scope);
      if (e.args[2]) return Eval(*e.args[2], scope);
      return Value::Undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
  }
  return Value::Undefined();
}

}  // namespace ferry::tmpl
