#include "text/jinja/parser.h"

#include <initializer_list>
#include <utility>

#include "text/jinja/check.h"
#include "text/jinja/error.h"
#include "text/jinja/lexer.h"
#include "text/jinja/symbols.h"

namespace loom::text::jinja {
namespace {

using Names = std::initializer_list<std::string_view>;

bool is_compare_op(const Token& t, CompareOp* op) {
  if (t.type != TokenType::kOperator) return false;
  static const std::pair<std::string_view, CompareOp> kOps[] = {
      {"==", CompareOp::kEq},   {"!=", CompareOp::kNe}, {"<", CompareOp::kLt},
      {"<=", CompareOp::kLtEq}, {">", CompareOp::kGt},  {">=", CompareOp::kGtEq}};
  for (const auto& [text, o] : kOps) {
    if (t.value == text) {
      *op = o;
      return true;
    }
  }
  return false;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  std::unique_ptr<TemplateNode> parse() {
    auto root = std::make_unique<TemplateNode>();
    root->body = subparse({});
    return root;
  }

 private:
  // ---- token stream ----
  const Token& cur() const { return tokens_[pos_]; }
  const Token& look() const { return tokens_[pos_ + 1 < tokens_.size() ? pos_ + 1 : pos_]; }
  const Token& next() {
    const Token& t = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return t;
  }
  bool is_op(std::string_view op) const { return cur().type == TokenType::kOperator && cur().value == op; }
  bool is_name(std::string_view name) const { return cur().type == TokenType::kName && cur().value == name; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  bool is_any_name(Names names) const {
    for (auto n : names) {
      if (is_name(n)) return true;
    }
    return false;
  }

  [[noreturn]] void fail(const std::string& message, const Token& at) const {
    throw TemplateError(ErrorKind::kSyntax, message, at.line, at.column);
  }
  [[noreturn]] void fail(const std::string& message) const { fail(message, cur()); }

  void fail_unexpected(std::string_view expected) const {
    if (cur().type == TokenType::kEof)
      fail("unexpected end of template, expected '" + std::string(expected) + "'.");
    fail("expected token '" + std::string(expected) + "', got '" + describe_token(cur()) + "'");
  }
  const Token& expect_op(std::string_view op) {
    if (!is_op(op)) fail_unexpected(op);
    return next();
  }
  const Token& expect_type(TokenType type, std::string_view what) {
    if (cur().type != type) fail_unexpected(what);
    return next();
  }
  const Token& expect_name() { return expect_type(TokenType::kName, "name"); }
  const Token& expect_name(std::string_view name) {
    if (!is_name(name)) fail_unexpected(name);
    return next();
  }

  // ---- statements ----

  // Parses until a block tag whose name is in end_names (left unconsumed, at the name) or EOF.
  StmtList subparse(std::vector<std::string_view> end_names) {
    StmtList body;
    std::unique_ptr<OutputStmt> data;
    auto flush = [&]() {
      if (data) body.push_back(std::move(data));
      data.reset();
    };
    auto add_output = [&](OutputItem item, int line) {
      if (!data) data = std::make_unique<OutputStmt>(line);
      data->items.push_back(std::move(item));
    };
    while (cur().type != TokenType::kEof) {
      const Token& t = cur();
      if (t.type == TokenType::kData) {
        add_output(OutputItem{t.value, nullptr}, t.line);
        next();
      } else if (t.type == TokenType::kVariableBegin) {
        int line = t.line;
        next();
        ExprPtr e = parse_tuple(false, true, {}, false);
        expect_type(TokenType::kVariableEnd, "end of print statement");
        add_output(OutputItem{"", std::move(e)}, line);
      } else if (t.type == TokenType::kBlockBegin) {
        flush();
        next();
        for (auto n : end_names) {
          if (is_name(n)) return body;
        }
        StmtPtr s = parse_statement();
        if (s) body.push_back(std::move(s));
        expect_type(TokenType::kBlockEnd, "end of statement block");
      } else {
        fail("unexpected '" + describe_token(t) + "'");
      }
    }
    flush();
    if (!end_names.empty()) fail_eof(end_names);
    return body;
  }

  [[noreturn]] void fail_eof(const std::vector<std::string_view>& end_names) const {
    std::string msg = "Unexpected end of template. Jinja was looking for the following tags: ";
    for (size_t i = 0; i < end_names.size(); ++i) {
      if (i > 0) msg += i + 1 == end_names.size() ? " or " : ", ";
      msg += "'" + std::string(end_names[i]) + "'";
    }
    msg += ".";
    if (!tag_stack_.empty())
      msg += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
    fail(msg);
  }

  StmtList parse_statements(std::vector<std::string_view> end_names, bool drop_needle) {
    skip_op(":");  // jinja2 accepts an optional colon: {% for x in y: %}
    expect_type(TokenType::kBlockEnd, "end of statement block");
    StmtList body = subparse(end_names);
    if (drop_needle) next();
    return body;
  }

  StmtPtr parse_statement() {
    const Token& t = cur();
    if (t.type != TokenType::kName) fail("tag name expected");
    std::string name = t.value;
    tag_stack_.push_back(name);
    StmtPtr result;
    if (name == "for") {
      result = parse_for();
    } else if (name == "if") {
      result = parse_if();
    } else if (name == "set") {
      result = parse_set();
    } else if (name == "macro") {
      result = parse_macro();
    } else if (name == "call") {
      result = parse_call_block();
    } else if (name == "filter") {
      result = parse_filter_block();
    } else if (name == "with") {
      result = parse_with();
    } else if (name == "print") {
      result = parse_print();
    } else if (name == "break" || name == "continue") {
      const Token& kw = next();
      result = std::make_unique<LoopControlStmt>(name == "break" ? StmtKind::kBreak : StmtKind::kContinue,
                                                 kw.line);
    } else if (name == "generation") {
      result = parse_generation();
    } else if (name == "include" || name == "import" || name == "from" || name == "extends") {
      result = parse_template_load(name);
    } else if (name == "block") {
      result = parse_block();
    } else if (name == "autoescape") {
      fail("the '" + name +
           "' tag is not supported by Loom's template engine (chat templates do not use it)");
    } else {
      tag_stack_.pop_back();
      fail("Encountered unknown tag '" + name + "'.");
    }
    tag_stack_.pop_back();
    return result;
  }

  // include/import/from/extends: `tag <expr> [...]`. The trailing clauses (ignore missing, as x,
  // import a as b, with context) are accepted without interpretation.
  StmtPtr parse_template_load(const std::string& tag) {
    auto node = std::make_unique<TemplateLoadStmt>(tag, next().line);
    node->name = parse_expression(true);
    while (cur().type != TokenType::kBlockEnd && cur().type != TokenType::kEof) {
      if (cur().type != TokenType::kName && !is_op(",")) fail("expected end of " + tag + " statement");
      next();
    }
    return node;
  }

  StmtPtr parse_block() {
    auto node = std::make_unique<BlockStmt>(expect_name("block").line);
    node->name = expect_name().value;
    for (const auto& b : block_names_) {
      if (b == node->name) fail("block '" + node->name + "' defined twice");
    }
    block_names_.push_back(node->name);
    node->scoped = skip_name("scoped");
    if (skip_name("required")) fail("required blocks are not supported by Loom's template engine");
    if (is_op("-")) {
      fail(
          "Block names in Jinja have to be valid Python identifiers and may not contain hyphens, use an "
          "underscore instead.");
    }
    node->body = parse_statements({"endblock"}, true);
    skip_name(node->name);
    return node;
  }

  StmtPtr parse_for() {
    auto node = std::make_unique<ForStmt>(expect_name("for").line);
    node->target = parse_assign_target(true, false, {"in"}, false);
    expect_name("in");
    node->iter = parse_tuple(false, false, {"recursive"}, false);
    if (skip_name("if")) node->filter = parse_expression(true);
    node->recursive = skip_name("recursive");
    node->body = parse_statements({"endfor", "else"}, false);
    if (next().value != "endfor") node->else_body = parse_statements({"endfor"}, true);
    return node;
  }

  StmtPtr parse_if() {
    auto node = std::make_unique<IfStmt>(expect_name("if").line);
    while (true) {
      ExprPtr test = parse_tuple(false, false, {}, false);
      StmtList body = parse_statements({"elif", "else", "endif"}, false);
      node->branches.emplace_back(std::move(test), std::move(body));
      const Token& t = next();
      if (t.value == "elif") continue;
      if (t.value == "else") node->else_body = parse_statements({"endif"}, true);
      break;
    }
    return node;
  }

  StmtPtr parse_set() {
    int line = expect_name("set").line;
    ExprPtr target = parse_assign_target(true, false, {}, true);
    if (skip_op("=")) {
      auto node = std::make_unique<AssignStmt>(line);
      node->target = std::move(target);
      node->value = parse_tuple(false, true, {}, false);
      return node;
    }
    auto node = std::make_unique<AssignBlockStmt>(line);
    node->target = std::move(target);
    if (is_op("|")) node->filter = parse_filter(nullptr, false);
    node->body = parse_statements({"endset"}, true);
    return node;
  }

  void parse_signature(MacroDef* def) {
    expect_op("(");
    while (!is_op(")")) {
      if (!def->params.empty()) expect_op(",");
      const Token& name_tok = cur();
      ExprPtr arg = parse_assign_target(false, true, {}, false);
      std::string name = static_cast<NameExpr*>(arg.get())->name;
      if (skip_op("=")) {
        def->defaults.push_back(parse_expression(true));
      } else if (!def->defaults.empty()) {
        fail("non-default argument follows default argument", name_tok);
      }
      def->params.push_back(std::move(name));
    }
    expect_op(")");
  }

  StmtPtr parse_macro() {
    auto node = std::make_unique<MacroStmt>(expect_name("macro").line);
    node->def = std::make_shared<MacroDef>();
    node->def->line = node->line;
    ExprPtr name = parse_assign_target(false, true, {}, false);
    node->def->name = static_cast<NameExpr*>(name.get())->name;
    parse_signature(node->def.get());
    node->def->body = parse_statements({"endmacro"}, true);
    return node;
  }

  StmtPtr parse_call_block() {
    auto node = std::make_unique<CallBlockStmt>(expect_name("call").line);
    node->caller = std::make_shared<MacroDef>();
    node->caller->name = "caller";
    node->caller->line = node->line;
    if (is_op("(")) parse_signature(node->caller.get());
    int line = cur().line;
    ExprPtr call = parse_expression(true);
    if (call->kind != ExprKind::kCall) fail("expected call", tokens_[pos_ > 0 ? pos_ - 1 : 0]);
    (void)line;
    node->call.reset(static_cast<CallExpr*>(call.release()));
    node->caller->body = parse_statements({"endcall"}, true);
    return node;
  }

  StmtPtr parse_generation() {
    auto node = std::make_unique<CallBlockStmt>(expect_name("generation").line);
    node->caller = std::make_shared<MacroDef>();
    node->caller->name = "caller";
    node->caller->line = node->line;
    node->caller->body = parse_statements({"endgeneration"}, true);
    return node;
  }

  StmtPtr parse_filter_block() {
    auto node = std::make_unique<FilterBlockStmt>(expect_name("filter").line);
    node->filter = parse_filter(nullptr, true);
    node->body = parse_statements({"endfilter"}, true);
    return node;
  }

  StmtPtr parse_with() {
    auto node = std::make_unique<WithStmt>(expect_name("with").line);
    while (cur().type != TokenType::kBlockEnd) {
      if (!node->targets.empty()) expect_op(",");
      ExprPtr target = parse_assign_target(true, false, {}, false);
      set_ctx(target.get(), NameCtx::kParam);
      node->targets.push_back(std::move(target));
      expect_op("=");
      node->values.push_back(parse_expression(true));
    }
    node->body = parse_statements({"endwith"}, true);
    return node;
  }

  StmtPtr parse_print() {
    auto node = std::make_unique<OutputStmt>(expect_name("print").line);
    while (cur().type != TokenType::kBlockEnd) {
      if (!node->items.empty()) expect_op(",");
      node->items.push_back(OutputItem{"", parse_expression(true)});
    }
    return node;
  }

  static void set_ctx(Expr* e, NameCtx ctx) {
    if (e->kind == ExprKind::kName) {
      static_cast<NameExpr*>(e)->ctx = ctx;
    } else if (e->kind == ExprKind::kTuple) {
      auto* t = static_cast<TupleExpr*>(e);
      t->ctx = ctx;
      for (auto& item : t->items) set_ctx(item.get(), ctx);
    }
  }

  static bool can_assign(const Expr* e) {
    if (e->kind == ExprKind::kName) {
      const std::string& n = static_cast<const NameExpr*>(e)->name;
      return n != "true" && n != "false" && n != "none" && n != "True" && n != "False" && n != "None";
    }
    if (e->kind == ExprKind::kTuple) {
      for (const auto& item : static_cast<const TupleExpr*>(e)->items) {
        if (!can_assign(item.get())) return false;
      }
      return true;
    }
    return e->kind == ExprKind::kNsRef;
  }

  ExprPtr parse_assign_target(bool with_tuple, bool name_only, Names extra_end, bool with_namespace) {
    const Token& start = cur();
    ExprPtr target;
    if (name_only) {
      const Token& t = expect_name();
      target = std::make_unique<NameExpr>(t.value, NameCtx::kStore, t.line);
    } else if (with_namespace && look().type == TokenType::kOperator && look().value == ".") {
      const Token& ns = expect_name();
      next();  // "."
      const Token& attr = expect_name();
      target = std::make_unique<NsRefExpr>(ns.value, attr.value, ns.line);
    } else if (with_tuple) {
      target = parse_tuple(true, true, extra_end, false);
    } else {
      target = parse_primary();
    }
    set_ctx(target.get(), NameCtx::kStore);
    if (!can_assign(target.get())) fail("can't assign to this expression", start);
    return target;
  }

  // ---- expressions ----

  ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

  ExprPtr parse_condexpr() {
    int line = cur().line;
    ExprPtr expr1 = parse_or();
    while (skip_name("if")) {
      auto node = std::make_unique<CondExpr>(line);
      node->test = parse_or();
      if (skip_name("else")) node->else_expr = parse_condexpr();
      node->then_expr = std::move(expr1);
      expr1 = std::move(node);
      line = cur().line;
    }
    return expr1;
  }

  ExprPtr parse_or() {
    int line = cur().line;
    ExprPtr left = parse_and();
    while (skip_name("or")) {
      left = std::make_unique<BinaryExpr>(BinaryOp::kOr, std::move(left), parse_and(), line);
      line = cur().line;
    }
    return left;
  }

  ExprPtr parse_and() {
    int line = cur().line;
    ExprPtr left = parse_not();
    while (skip_name("and")) {
      left = std::make_unique<BinaryExpr>(BinaryOp::kAnd, std::move(left), parse_not(), line);
      line = cur().line;
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      int line = next().line;
      return std::make_unique<UnaryExpr>(UnaryOp::kNot, parse_not(), line);
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr expr = parse_math1();
    std::unique_ptr<CompareExpr> cmp;
    while (true) {
      CompareOp op;
      if (is_compare_op(cur(), &op)) {
        next();
      } else if (skip_name("in")) {
        op = CompareOp::kIn;
      } else if (is_name("not") && look().type == TokenType::kName && look().value == "in") {
        next();
        next();
        op = CompareOp::kNotIn;
      } else {
        break;
      }
      if (!cmp) cmp = std::make_unique<CompareExpr>(std::move(expr), line);
      cmp->ops.emplace_back(op, parse_math1());
      line = cur().line;
    }
    if (cmp) return cmp;
    return expr;
  }

  ExprPtr parse_math1() {
    int line = cur().line;
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      BinaryOp op = next().value == "+" ? BinaryOp::kAdd : BinaryOp::kSub;
      left = std::make_unique<BinaryExpr>(op, std::move(left), parse_concat(), line);
      line = cur().line;
    }
    return left;
  }

  ExprPtr parse_concat() {
    int line = cur().line;
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    auto node = std::make_unique<ConcatExpr>(line);
    node->items.push_back(std::move(first));
    while (skip_op("~")) node->items.push_back(parse_math2());
    return node;
  }

  ExprPtr parse_math2() {
    int line = cur().line;
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = next().value;
      BinaryOp b = op == "*"    ? BinaryOp::kMul
                   : op == "/"  ? BinaryOp::kDiv
                   : op == "//" ? BinaryOp::kFloorDiv
                                : BinaryOp::kMod;
      left = std::make_unique<BinaryExpr>(b, std::move(left), parse_pow(), line);
      line = cur().line;
    }
    return left;
  }

  ExprPtr parse_pow() {
    int line = cur().line;
    ExprPtr left = parse_unary(true);
    while (skip_op("**")) {
      left = std::make_unique<BinaryExpr>(BinaryOp::kPow, std::move(left), parse_unary(true), line);
      line = cur().line;
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
    int line = cur().line;
    ExprPtr node;
    if (skip_op("-")) {
      node = std::make_unique<UnaryExpr>(UnaryOp::kNeg, parse_unary(false), line);
    } else if (skip_op("+")) {
      node = std::make_unique<UnaryExpr>(UnaryOp::kPos, parse_unary(false), line);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    int line = t.line;
    switch (t.type) {
      case TokenType::kName: {
        std::string v = t.value;
        next();
        if (v == "true" || v == "True") return std::make_unique<ConstExpr>(Value::boolean(true), line);
        if (v == "false" || v == "False") return std::make_unique<ConstExpr>(Value::boolean(false), line);
        if (v == "none" || v == "None") return std::make_unique<ConstExpr>(Value::none(), line);
        return std::make_unique<NameExpr>(std::move(v), NameCtx::kLoad, line);
      }
      case TokenType::kString: {
        std::string buf = t.value;
        next();
        while (cur().type == TokenType::kString) buf += next().value;  // implicit concatenation
        return std::make_unique<ConstExpr>(Value::string(std::move(buf)), line);
      }
      case TokenType::kInteger: {
        int64_t v = t.int_value;
        next();
        return std::make_unique<ConstExpr>(Value::integer(v), line);
      }
      case TokenType::kFloat: {
        double v = t.float_value;
        next();
        return std::make_unique<ConstExpr>(Value::number(v), line);
      }
      case TokenType::kOperator:
        if (t.value == "(") {
          next();
          ExprPtr e = parse_tuple(false, true, {}, true);
          expect_op(")");
          return e;
        }
        if (t.value == "[") return parse_list();
        if (t.value == "{") return parse_dict();
        break;
      default: break;
    }
    fail("unexpected '" + describe_token(t) + "'");
  }

  bool is_tuple_end(Names extra_end) const {
    TokenType ty = cur().type;
    if (ty == TokenType::kVariableEnd || ty == TokenType::kBlockEnd || is_op(")")) return true;
    return is_any_name(extra_end);
  }

  // jinja2 parse_tuple: a comma-separated list becomes a Tuple, a single expression stays itself.
  ExprPtr parse_tuple(bool simplified, bool with_condexpr, Names extra_end, bool explicit_parentheses) {
    int line = cur().line;
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      if (simplified) {
        args.push_back(parse_primary());
      } else {
        args.push_back(parse_expression(with_condexpr));
      }
      if (is_op(",")) {
        is_tuple = true;
      } else {
        break;
      }
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parentheses) fail("Expected an expression, got '" + describe_token(cur()) + "'");
    }
    auto t = std::make_unique<TupleExpr>(line);
    t->items = std::move(args);
    return t;
  }

  ExprPtr parse_list() {
    auto node = std::make_unique<ListExpr>(expect_op("[").line);
    while (!is_op("]")) {
      if (!node->items.empty()) expect_op(",");
      if (is_op("]")) break;
      node->items.push_back(parse_expression(true));
    }
    expect_op("]");
    return node;
  }

  ExprPtr parse_dict() {
    auto node = std::make_unique<DictExpr>(expect_op("{").line);
    while (!is_op("}")) {
      if (!node->items.empty()) expect_op(",");
      if (is_op("}")) break;
      ExprPtr key = parse_expression(true);
      expect_op(":");
      ExprPtr value = parse_expression(true);
      node->items.emplace_back(std::move(key), std::move(value));
    }
    expect_op("}");
    return node;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        node = parse_filter(std::move(node), false);
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& t = next();
    int line = t.line;
    if (t.value == ".") {
      const Token& attr = next();
      if (attr.type == TokenType::kName)
        return std::make_unique<GetattrExpr>(std::move(node), attr.value, line);
      if (attr.type != TokenType::kInteger) fail("expected name or number", attr);
      return std::make_unique<GetitemExpr>(
          std::move(node), std::make_unique<ConstExpr>(Value::integer(attr.int_value), line), line);
    }
    // "["
    std::vector<ExprPtr> args;
    while (!is_op("]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    ExprPtr arg;
    if (args.size() == 1) {
      arg = std::move(args[0]);
    } else {
      auto tuple = std::make_unique<TupleExpr>(line);
      tuple->items = std::move(args);
      arg = std::move(tuple);
    }
    return std::make_unique<GetitemExpr>(std::move(node), std::move(arg), line);
  }

  ExprPtr parse_subscribed() {
    int line = cur().line;
    auto slice = std::make_unique<SliceExpr>(line);
    if (is_op(":")) {
      next();
    } else {
      ExprPtr e = parse_expression(true);
      if (!is_op(":")) return e;
      next();
      slice->start = std::move(e);
    }
    if (!is_op(":") && !is_op("]") && !is_op(",")) slice->stop = parse_expression(true);
    if (is_op(":")) {
      next();
      if (!is_op("]") && !is_op(",")) slice->step = parse_expression(true);
    }
    return slice;
  }

  void parse_call_args(CallArgsNode* out) {
    const Token& open = expect_op("(");
    bool require_comma = false;
    auto ensure = [&](bool ok) {
      if (!ok) fail("invalid syntax for function call expression", open);
    };
    while (!is_op(")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(")")) break;
      }
      if (is_op("*")) {
        ensure(!out->dyn_args && !out->dyn_kwargs);
        next();
        out->dyn_args = parse_expression(true);
      } else if (is_op("**")) {
        ensure(!out->dyn_kwargs);
        next();
        out->dyn_kwargs = parse_expression(true);
      } else if (cur().type == TokenType::kName && look().type == TokenType::kOperator &&
                 look().value == "=") {
        ensure(!out->dyn_kwargs);
        std::string key = next().value;
        next();
        out->kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        ensure(!out->dyn_args && !out->dyn_kwargs && out->kwargs.empty());
        out->args.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr node) {
    auto call = std::make_unique<CallExpr>(std::move(node), cur().line);
    parse_call_args(&call->args);
    return call;
  }

  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    while (is_op("|") || start_inline) {
      if (!start_inline) next();
      const Token& name_tok = expect_name();
      std::string name = name_tok.value;
      while (is_op(".")) {
        next();
        name += "." + expect_name().value;
      }
      auto f = std::make_unique<FilterExpr>(std::move(node), std::move(name), name_tok.line);
      if (is_op("(")) parse_call_args(&f->args);
      node = std::move(f);
      start_inline = false;
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    int line = expect_name("is").line;
    bool negated = skip_name("not");
    std::string name = expect_name().value;
    while (is_op(".")) {
      next();
      name += "." + expect_name().value;
    }
    auto t = std::make_unique<TestExpr>(std::move(node), std::move(name), line);
    const Token& c = cur();
    bool arg_start = c.type == TokenType::kName || c.type == TokenType::kString ||
                     c.type == TokenType::kInteger || c.type == TokenType::kFloat || is_op("[") || is_op("{");
    if (is_op("(")) {
      parse_call_args(&t->args);
    } else if (arg_start && !is_any_name({"else", "or", "and"})) {
      if (is_name("is")) fail("You cannot chain multiple tests with is");
      ExprPtr arg = parse_postfix(parse_primary());
      t->args.args.push_back(std::move(arg));
    }
    if (negated) return std::make_unique<UnaryExpr>(UnaryOp::kNot, std::move(t), line);
    return t;
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  std::vector<std::string> tag_stack_;
  std::vector<std::string> block_names_;
};

// ---- check pass: bind filters/tests, validate loop controls (jinja2 compile-time errors) ----

}  // namespace

std::unique_ptr<TemplateNode> parse_template(std::string_view source) {
  std::unique_ptr<TemplateNode> root = Parser(tokenize(source)).parse();
  check_template(*root);
  analyze_symbols(*root);
  return root;
}

}  // namespace loom::text::jinja
