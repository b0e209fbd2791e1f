// Parser: recursive descent over the token stream (jinja2/parser.py's structure and precedence).
#include "template/parser.h"

#include <set>

#include "template/builtins.h"
#include "template/error.h"

namespace ferry::tmpl {
namespace {

using T = Token::Type;

class Parser {
 public:
  explicit Parser(const std::vector<Token>& tokens) : toks_(tokens) {}

  Body ParseTemplate() {
    Body body = ParseBody({});
    if (Cur().type != T::kEof) Fail("unexpected '" + Describe(Cur()) + "'");
    return body;
  }

 private:
  // Depth guard for recursion on nested input.
  struct Nest {
    explicit Nest(Parser* p) : p(p) {
      if (++p->depth_ > kMaxParseDepth) p->Fail("template nests too deeply (limit " + std::to_string(kMaxParseDepth) + ")");
    }
    ~Nest() { --p->depth_; }
    Parser* p;
  };

  const Token& Cur() const { return toks_[pos_]; }
  const Token& Peek(size_t n = 1) const { return toks_[std::min(pos_ + n, toks_.size() - 1)]; }
  void Next() {
    if (pos_ + 1 < toks_.size()) ++pos_;
  }
  bool IsOp(const char* op) const { return Cur().type == T::kOp && Cur().text == op; }
  bool IsName(const char* n) const { return Cur().type == T::kName && Cur().text == n; }
  bool SkipOp(const char* op) {
    if (!IsOp(op)) return false;
    Next();
    return true;
  }
  bool SkipName(const char* n) {
    if (!IsName(n)) return false;
    Next();
    return true;
  }
  void ExpectOp(const char* op) {
    if (!SkipOp(op)) Fail(std::string("expected '") + op + "', got '" + Describe(Cur()) + "'");
  }
  void ExpectBlockEnd() {
    if (Cur().type != T::kBlockEnd) Fail("expected end of statement block, got '" + Describe(Cur()) + "'");
    Next();
  }
  std::string ExpectName() {
    if (Cur().type != T::kName) Fail("expected a name, got '" + Describe(Cur()) + "'");
    std::string n = Cur().text;
    Next();
    return n;
  }
  static std::string Describe(const Token& t) {
    switch (t.type) {
      case T::kEof: return "end of template";
      case T::kBlockEnd: return "end of statement block";
      case T::kVarEnd: return "end of print statement";
      case T::kBlockBegin: return "begin of statement block";
      case T::kVarBegin: return "begin of print statement";
      default: return t.text;
    }
  }
  [[noreturn]] void Fail(const std::string& what) const {
    throw TemplateError("TemplateSyntaxError", what + " (line " + std::to_string(Cur().line) + ")");
  }

  // jinja2's compile-time check for unknown filters/tests outside `if` blocks.
  [[noreturn]] void FailAssertion(const std::string& what) const {
    throw TemplateError("TemplateAssertionError", what + " (line " + std::to_string(Cur().line) + ")");
  }

  ExprPtr Node(Expr::Kind kind) const {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = Cur().line;
    return e;
  }
  StmtPtr NewStmt(Stmt::Kind kind) const {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = Cur().line;
    return s;
  }

  // Statements until a block whose keyword is in `ends` (left unconsumed at the keyword).
  Body ParseBody(const std::set<std::string>& ends) {
    Nest nest(this);
    Body body;
    for (;;) {
      const Token& t = Cur();
      if (t.type == T::kEof) {
        if (!ends.empty()) Fail("unexpected end of template; expected one of: " + Join(ends));
        return body;
      }
      if (t.type == T::kText) {
        auto s = NewStmt(Stmt::Kind::kText);
        s->text = t.text;
        body.push_back(std::move(s));
        Next();
      } else if (t.type == T::kVarBegin) {
        Next();
        auto s = NewStmt(Stmt::Kind::kOutput);
        s->expr = ParseTuple(true);
        if (Cur().type != T::kVarEnd) Fail("expected end of print statement, got '" + Describe(Cur()) + "'");
        Next();
        body.push_back(std::move(s));
      } else if (t.type == T::kBlockBegin) {
        const Token& kw = Peek();
        if (kw.type != T::kName) {
          Next();
          Fail("expected a statement name, got '" + Describe(Cur()) + "'");
        }
        if (ends.count(kw.text)) {
          Next();  // leave the keyword current
          return body;
        }
        Next();
        body.push_back(ParseStatement());
      } else {
        Fail("unexpected '" + Describe(t) + "'");
      }
    }
  }
  static std::string Join(const std::set<std::string>& s) {
    std::string out;
    for (const auto& x : s) out += (out.empty() ? "'" : ", '") + x + "'";
    return out;
  }

  StmtPtr ParseStatement() {
    std::string kw = Cur().text;
    if (kw == "if") return ParseIf();
    if (kw == "for") return ParseFor();
    if (kw == "set") return ParseSet();
    if (kw == "macro") return ParseMacro();
    if (kw == "call") return ParseCallBlock();
    if (kw == "filter") return ParseFilterBlock();
    if (kw == "generation") {
      Next();
      ExpectBlockEnd();
      auto s = NewStmt(Stmt::Kind::kScope);
      s->body = ParseBody({"endgeneration"});
      Next();
      ExpectBlockEnd();
      return s;
    }
    if (kw == "break" || kw == "continue") {
      if (loop_depth_ == 0) Fail("'" + kw + "' outside of a for loop");
      auto s = NewStmt(kw == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue);
      Next();
      ExpectBlockEnd();
      return s;
    }
    static const std::set<std::string> kUnsupported = {"include", "import", "from", "extends", "block", "with", "autoescape", "do", "trans"};
    if (kUnsupported.count(kw))
      throw TemplateError("Unsupported", "unsupported template statement '{% " + kw + " %}' (line " + std::to_string(Cur().line) + ")",
                          StatusCode::kUnsupported);
    Fail("Encountered unknown tag '" + kw + "'");
  }

  StmtPtr ParseIf() {
    auto s = NewStmt(Stmt::Kind::kIf);
    ++soft_;
    for (;;) {
      Next();  // 'if' / 'elif'
      s->conds.push_back(ParseTuple(false));
      ExpectBlockEnd();
      s->bodies.push_back(ParseBody({"elif", "else", "endif"}));
      if (IsName("elif")) continue;
      if (SkipName("else")) {
        ExpectBlockEnd();
        s->else_body = ParseBody({"endif"});
      }
      break;
    }
    --soft_;
    Next();  // endif
    ExpectBlockEnd();
    return s;
  }

  StmtPtr ParseFor() {
    auto s = NewStmt(Stmt::Kind::kFor);
    Next();
    s->targets.push_back(ExpectName());
    while (SkipOp(",")) {
      if (IsName("in")) break;
      s->targets.push_back(ExpectName());
    }
    if (!SkipName("in")) Fail("expected 'in' in for loop");
    s->expr = ParseTuple(false, /*no_condexpr=*/true);
    if (SkipName("if")) s->cond = ParseExpression();
    if (IsName("recursive"))
      throw TemplateError("Unsupported", "unsupported template construct: recursive for loop (line " + std::to_string(Cur().line) + ")",
                          StatusCode::kUnsupported);
    ExpectBlockEnd();
    ++loop_depth_;
    s->body = ParseBody({"endfor", "else"});
    --loop_depth_;
    if (SkipName("else")) {
      ExpectBlockEnd();
      s->else_body = ParseBody({"endfor"});
    }
    Next();
    ExpectBlockEnd();
    return s;
  }

  StmtPtr ParseSet() {
    Next();
    std::string first = ExpectName();
    if (SkipOp(".")) {
      auto s = NewStmt(Stmt::Kind::kSet);
      s->targets.push_back(first);
      s->attr = ExpectName();
      ExpectOp("=");
      s->expr = ParseTuple(false);
      ExpectBlockEnd();
      return s;
    }
    std::vector<std::string> targets{first};
    while (SkipOp(",")) targets.push_back(ExpectName());
    if (SkipOp("=")) {
      auto s = NewStmt(Stmt::Kind::kSet);
      s->targets = std::move(targets);
      s->expr = ParseTuple(false);
      ExpectBlockEnd();
      return s;
    }
    if (targets.size() != 1) Fail("expected '='");
    auto s = NewStmt(Stmt::Kind::kSetBlock);
    s->targets = std::move(targets);
    if (IsOp("|")) s->filter = ParseFilterChain(nullptr);
    ExpectBlockEnd();
    s->body = ParseBody({"endset"});
    Next();
    ExpectBlockEnd();
    return s;
  }

  void ParseSignature(std::vector<std::pair<std::string, ExprPtr>>& params) {
    ExpectOp("(");
    while (!IsOp(")")) {
      if (!params.empty()) ExpectOp(",");
      if (IsOp(")")) break;
      std::string name = ExpectName();
      ExprPtr def;
      if (SkipOp("=")) def = ParseExpression();
      params.emplace_back(name, std::move(def));
    }
    ExpectOp(")");
  }

  StmtPtr ParseMacro() {
    auto s = NewStmt(Stmt::Kind::kMacro);
    Next();
    s->text = ExpectName();
    ParseSignature(s->params);
    ExpectBlockEnd();
    int saved_loop = loop_depth_;
    loop_depth_ = 0;
    s->body = ParseBody({"endmacro"});
    loop_depth_ = saved_loop;
    Next();
    ExpectBlockEnd();
    return s;
  }

  StmtPtr ParseCallBlock() {
    auto s = NewStmt(Stmt::Kind::kCallBlock);
    Next();
    if (IsOp("(")) ParseSignature(s->params);
    s->expr = ParseExpression();
    if (s->expr->kind != Expr::Kind::kCall) Fail("expected call");
    ExpectBlockEnd();
    s->body = ParseBody({"endcall"});
    Next();
    ExpectBlockEnd();
    return s;
  }

  StmtPtr ParseFilterBlock() {
    auto s = NewStmt(Stmt::Kind::kFilterBlock);
    Next();
    s->filter = ParseFilterChain(nullptr, /*first_needs_pipe=*/false);
    ExpectBlockEnd();
    s->body = ParseBody({"endfilter"});
    Next();
    ExpectBlockEnd();
    return s;
  }

  // ---- expressions ----

  // `a, b` becomes a tuple (print statements and set values), else a single expression.
  ExprPtr ParseTuple(bool allow_empty_paren, bool no_condexpr = false) {
    ExprPtr first = no_condexpr ? ParseOr() : ParseExpression();
    if (!IsOp(",")) return first;
    auto t = Node(Expr::Kind::kTuple);
    t->args.push_back(std::move(first));
    while (SkipOp(",")) {
      if (Cur().type == T::kBlockEnd || Cur().type == T::kVarEnd || IsOp(")")) break;
      t->args.push_back(no_condexpr ? ParseOr() : ParseExpression());
    }
    return t;
  }

  ExprPtr ParseExpression() {
    Nest nest(this);
    ExprPtr expr = ParseOr();
    while (IsName("if")) {
      Next();
      auto c = Node(Expr::Kind::kCondExpr);
      ++soft_;
      ExprPtr cond = ParseOr();
      ExprPtr other;
      if (SkipName("else")) other = ParseExpression();
      --soft_;
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(expr));
      c->args.push_back(std::move(other));
      expr = std::move(c);
    }
    return expr;
  }

  ExprPtr Binary(Expr::Kind kind, ExprPtr a, ExprPtr b, const std::string& op = {}) {
    auto e = Node(kind);
    e->name = op;
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  ExprPtr ParseOr() {
    ExprPtr left = ParseAnd();
    while (SkipName("or")) left = Binary(Expr::Kind::kOr, std::move(left), ParseAnd());
    return left;
  }
  ExprPtr ParseAnd() {
    ExprPtr left = ParseNot();
    while (SkipName("and")) left = Binary(Expr::Kind::kAnd, std::move(left), ParseNot());
    return left;
  }
  ExprPtr ParseNot() {
    if (IsName("not")) {
      Nest nest(this);
      Next();
      auto e = Node(Expr::Kind::kNot);
      e->args.push_back(ParseNot());
      return e;
    }
    return ParseCompare();
  }
  ExprPtr ParseCompare() {
    ExprPtr first = ParseMath1();
    ExprPtr cmp;
    for (;;) {
      std::string op;
      if (Cur().type == T::kOp && (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" ||
                                   Cur().text == ">" || Cur().text == "<=" || Cur().text == ">=")) {
        op = Cur().text;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && Peek().type == T::kName && Peek().text == "in") {
        op = "notin";
        Next();
        Next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = Node(Expr::Kind::kCompare);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(ParseMath1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }
  ExprPtr ParseMath1() {
    ExprPtr left = ParseConcat();
    while (IsOp("+") || IsOp("-")) {
      std::string op = Cur().text;
      Next();
      left = Binary(Expr::Kind::kBinary, std::move(left), ParseConcat(), op);
    }
    return left;
  }
  ExprPtr ParseConcat() {
    ExprPtr left = ParseMath2();
    while (SkipOp("~")) left = Binary(Expr::Kind::kBinary, std::move(left), ParseMath2(), "~");
    return left;
  }
  ExprPtr ParseMath2() {
    ExprPtr left = ParsePow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      std::string op = Cur().text;
      Next();
      left = Binary(Expr::Kind::kBinary, std::move(left), ParsePow(), op);
    }
    return left;
  }
  ExprPtr ParsePow() {
    ExprPtr left = ParseUnary(true);
    while (SkipOp("**")) left = Binary(Expr::Kind::kBinary, std::move(left), ParseUnary(true), "**");
    return left;
  }
  ExprPtr ParseUnary(bool with_filter) {
    Nest nest(this);
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      auto e = Node(IsOp("-") ? Expr::Kind::kNeg : Expr::Kind::kPos);
      Next();
      e->args.push_back(ParseUnary(false));
      node = std::move(e);
    } else {
      node = ParsePrimary();
    }
    node = ParsePostfix(std::move(node));
    if (with_filter) node = ParseFilterExpr(std::move(node));
    return node;
  }

  ExprPtr ParsePrimary() {
    const Token& t = Cur();
    if (t.type == T::kName) {
      auto e = Node(Expr::Kind::kLiteral);
      if (t.text == "true" || t.text == "True") {
        e->value = Value::Bool(true);
      } else if (t.text == "false" || t.text == "False") {
        e->value = Value::Bool(false);
      } else if (t.text == "none" || t.text == "None") {
        e->value = Value::None();
      } else {
        e->kind = Expr::Kind::kName;
        e->name = t.text;
      }
      Next();
      return e;
    }
    if (t.type == T::kString) {
      std::string s;
      while (Cur().type == T::kString) {
        s += Cur().text;
        Next();
      }
      auto e = Node(Expr::Kind::kLiteral);
      e->value = Value::Str(std::move(s));
      return e;
    }
    if (t.type == T::kInt || t.type == T::kFloat) {
      auto e = Node(Expr::Kind::kLiteral);
      e->value = t.type == T::kInt ? Value::Int(t.int_value) : Value::Float(t.float_value);
      Next();
      return e;
    }
    if (SkipOp("(")) {
      if (SkipOp(")")) return Node(Expr::Kind::kTuple);
      ExprPtr first = ParseExpression();
      if (SkipOp(")")) return first;
      auto tup = Node(Expr::Kind::kTuple);
      tup->args.push_back(std::move(first));
      while (SkipOp(",")) {
        if (IsOp(")")) break;
        tup->args.push_back(ParseExpression());
      }
      ExpectOp(")");
      return tup;
    }
    if (SkipOp("[")) {
      auto e = Node(Expr::Kind::kList);
      while (!IsOp("]")) {
        if (!e->args.empty()) ExpectOp(",");
        if (IsOp("]")) break;
        e->args.push_back(ParseExpression());
      }
      ExpectOp("]");
      return e;
    }
    if (SkipOp("{")) {
      auto e = Node(Expr::Kind::kDict);
      while (!IsOp("}")) {
        if (!e->args.empty()) ExpectOp(",");
        if (IsOp("}")) break;
        e->args.push_back(ParseExpression());
        ExpectOp(":");
        e->args.push_back(ParseExpression());
      }
      ExpectOp("}");
      return e;
    }
    Fail("unexpected '" + Describe(t) + "'");
  }

  ExprPtr ParsePostfix(ExprPtr node) {
    for (;;) {
      if (IsOp(".")) {
        Next();
        if (Cur().type == T::kName) {
          auto e = Node(Expr::Kind::kGetAttr);
          e->name = Cur().text;
          Next();
          e->args.push_back(std::move(node));
          node = std::move(e);
        } else if (Cur().type == T::kInt) {
          auto e = Node(Expr::Kind::kGetItem);
          auto idx = Node(Expr::Kind::kLiteral);
          idx->value = Value::Int(Cur().int_value);
          Next();
          e->args.push_back(std::move(node));
          e->args.push_back(std::move(idx));
          node = std::move(e);
        } else {
          Fail("expected name or number after '.'");
        }
      } else if (IsOp("[")) {
        Next();
        node = ParseSubscript(std::move(node));
      } else if (IsOp("(")) {
        node = ParseCall(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr ParseSubscript(ExprPtr obj) {
    Nest nest(this);
    ExprPtr parts[3];
    bool is_slice = false;
    int idx = 0;
    for (;;) {
      if (IsOp(":")) {
        is_slice = true;
        Next();
        if (++idx > 2) Fail("invalid slice");
        continue;
      }
      if (IsOp("]")) break;
      if (parts[idx]) Fail("invalid subscript");
      parts[idx] = ParseExpression();
      if (IsOp(",")) Fail("tuple subscripts are not supported");
    }
    ExpectOp("]");
    auto e = Node(is_slice ? Expr::Kind::kSlice : Expr::Kind::kGetItem);
    e->args.push_back(std::move(obj));
    if (!is_slice) {
      if (!parts[0]) Fail("empty subscript");
      e->args.push_back(std::move(parts[0]));
    } else {
      for (auto& p : parts) e->args.push_back(std::move(p));
    }
    return e;
  }

  // (args, name=value); `*args` / `**kwargs` are not supported.
  void ParseArgs(Expr& call) {
    ExpectOp("(");
    bool first = true;
    while (!IsOp(")")) {
      if (!first) ExpectOp(",");
      first = false;
      if (IsOp(")")) break;
      if (IsOp("*") || IsOp("**"))
        throw TemplateError("Unsupported", "unsupported template construct: *args/**kwargs in a call (line " + std::to_string(Cur().line) + ")",
                            StatusCode::kUnsupported);
      if (Cur().type == T::kName && Peek().type == T::kOp && Peek().text == "=") {
        std::string key = Cur().text;
        Next();
        Next();
        call.kwargs.emplace_back(key, ParseExpression());
      } else {
        if (!call.kwargs.empty()) Fail("positional argument after keyword argument");
        call.args.push_back(ParseExpression());
      }
    }
    ExpectOp(")");
  }

  ExprPtr ParseCall(ExprPtr callee) {
    Nest nest(this);
    auto e = Node(Expr::Kind::kCall);
    e->args.push_back(std::move(callee));
    ParseArgs(*e);
    return e;
  }

  ExprPtr ParseFilterExpr(ExprPtr node) {
    for (;;) {
      if (IsOp("|")) {
        node = ParseFilterChain(std::move(node));
      } else if (IsName("is")) {
        node = ParseTest(std::move(node));
      } else if (IsOp("(")) {
        node = ParseCall(std::move(node));
      } else {
        return node;
      }
    }
  }

  // `| f(args) | g` applied to `node` (null: the operand of a filter block / block set).
  ExprPtr ParseFilterChain(ExprPtr node, bool first_needs_pipe = true) {
    bool first = true;
    while (IsOp("|") || (first && !first_needs_pipe)) {
      Nest nest(this);
      if (IsOp("|")) Next();
      first = false;
      auto f = Node(Expr::Kind::kFilter);
      f->name = ExpectName();
      while (SkipOp(".")) f->name += "." + ExpectName();
      if (!IsKnownFilter(f->name) && soft_ == 0) FailAssertion("No filter named '" + f->name + "'.");
      f->args.push_back(std::move(node));
      if (IsOp("(")) ParseArgs(*f);
      node = std::move(f);
    }
    return node;
  }

  ExprPtr ParseTest(ExprPtr node) {
    Nest nest(this);
    Next();  // 'is'
    auto t = Node(Expr::Kind::kTest);
    t->negated = SkipName("not");
    t->name = ExpectName();
    while (SkipOp(".")) t->name += "." + ExpectName();
    if (!IsKnownTest(t->name) && soft_ == 0) FailAssertion("No test named '" + t->name + "'.");
    t->args.push_back(std::move(node));
    if (IsOp("(")) {
      ParseArgs(*t);
    } else if ((Cur().type == T::kName || Cur().type == T::kString || Cur().type == T::kInt ||
                Cur().type == T::kFloat || IsOp("[") || IsOp("{")) &&
               !IsName("else") && !IsName("or") && !IsName("and")) {
      if (IsName("is")) Fail("You cannot chain multiple tests with is");
      t->args.push_back(ParsePostfix(ParsePrimary()));
    }
    return t;
  }

  const std::vector<Token>& toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int soft_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body Parse(const std::vector<Token>& tokens) { return Parser(tokens).ParseTemplate(); }

}  // namespace ferry::tmpl
