#include "text/jinja/check.h"

#include <string>

#include "text/jinja/builtins.h"
#include "text/jinja/error.h"

namespace loom::text::jinja {
namespace {

class Checker {
 public:
  void stmts(StmtList& list, bool soft, int loops) {
    for (auto& s : list) stmt(*s, soft, loops);
  }

 private:
  [[noreturn]] static void fail(const std::string& msg, int line) {
    throw TemplateError(ErrorKind::kSyntax, msg, line, 0);
  }

  void args(CallArgsNode& a, bool soft) {
    for (auto& e : a.args) expr(e.get(), soft);
    for (auto& kv : a.kwargs) expr(kv.second.get(), soft);
    expr(a.dyn_args.get(), soft);
    expr(a.dyn_kwargs.get(), soft);
  }

  void macro(MacroDef& def) {
    for (auto& d : def.defaults) expr(d.get(), false);
    stmts(def.body, false, 0);  // a macro is its own Python function: no enclosing loop
  }

  void stmt(Stmt& s, bool soft, int loops) {
    switch (s.kind) {
      case StmtKind::kOutput:
        for (auto& item : static_cast<OutputStmt&>(s).items) expr(item.expr.get(), soft);
        break;
      case StmtKind::kFor: {
        auto& f = static_cast<ForStmt&>(s);
        expr(f.iter.get(), soft);
        expr(f.filter.get(), false);
        stmts(f.body, false, f.recursive ? 1 : loops + 1);
        stmts(f.else_body, false, loops);
        break;
      }
      case StmtKind::kIf: {
        auto& f = static_cast<IfStmt&>(s);
        for (auto& [test, body] : f.branches) {
          expr(test.get(), true);
          stmts(body, true, loops);
        }
        stmts(f.else_body, true, loops);
        break;
      }
      case StmtKind::kMacro: macro(*static_cast<MacroStmt&>(s).def); break;
      case StmtKind::kCallBlock: {
        auto& c = static_cast<CallBlockStmt&>(s);
        if (c.call) {
          expr(c.call->callee.get(), soft);
          args(c.call->args, soft);
        }
        macro(*c.caller);
        break;
      }
      case StmtKind::kFilterBlock: {
        auto& f = static_cast<FilterBlockStmt&>(s);
        stmts(f.body, false, loops);
        expr(f.filter.get(), false);
        break;
      }
      case StmtKind::kWith: {
        auto& w = static_cast<WithStmt&>(s);
        for (auto& v : w.values) expr(v.get(), soft);
        stmts(w.body, false, loops);
        break;
      }
      case StmtKind::kAssign: expr(static_cast<AssignStmt&>(s).value.get(), soft); break;
      case StmtKind::kAssignBlock: {
        auto& a = static_cast<AssignBlockStmt&>(s);
        stmts(a.body, false, loops);
        expr(a.filter.get(), false);
        break;
      }
      case StmtKind::kTemplateLoad: expr(static_cast<TemplateLoadStmt&>(s).name.get(), soft); break;
      case StmtKind::kBlock: stmts(static_cast<BlockStmt&>(s).body, false, 0); break;  // its own function
      case StmtKind::kBreak:
      case StmtKind::kContinue:
        if (loops == 0)
          fail(std::string("'") + (s.kind == StmtKind::kBreak ? "break" : "continue") + "' outside loop",
               s.line);
        break;
    }
  }

  void expr(Expr* e, bool soft) {
    if (e == nullptr) return;
    switch (e->kind) {
      case ExprKind::kConst:
      case ExprKind::kName:
      case ExprKind::kNsRef: break;
      case ExprKind::kTuple:
        for (auto& i : static_cast<TupleExpr*>(e)->items) expr(i.get(), soft);
        break;
      case ExprKind::kList:
        for (auto& i : static_cast<ListExpr*>(e)->items) expr(i.get(), soft);
        break;
      case ExprKind::kDict:
        for (auto& [k, v] : static_cast<DictExpr*>(e)->items) {
          expr(k.get(), soft);
          expr(v.get(), soft);
        }
        break;
      case ExprKind::kGetattr: expr(static_cast<GetattrExpr*>(e)->obj.get(), soft); break;
      case ExprKind::kGetitem:
        expr(static_cast<GetitemExpr*>(e)->obj.get(), soft);
        expr(static_cast<GetitemExpr*>(e)->arg.get(), soft);
        break;
      case ExprKind::kSlice: {
        auto* s = static_cast<SliceExpr*>(e);
        expr(s->start.get(), soft);
        expr(s->stop.get(), soft);
        expr(s->step.get(), soft);
        break;
      }
      case ExprKind::kCall:
        expr(static_cast<CallExpr*>(e)->callee.get(), soft);
        args(static_cast<CallExpr*>(e)->args, soft);
        break;
      case ExprKind::kFilter: {
        auto* f = static_cast<FilterExpr*>(e);
        f->fn = find_filter(f->name);
        if (f->fn == nullptr && !soft) fail("No filter named '" + f->name + "'.", f->line);
        expr(f->operand.get(), soft);
        args(f->args, soft);
        break;
      }
      case ExprKind::kTest: {
        auto* t = static_cast<TestExpr*>(e);
        t->fn = find_test(t->name);
        if (t->fn == nullptr && !soft) fail("No test named '" + t->name + "'.", t->line);
        expr(t->operand.get(), soft);
        args(t->args, soft);
        break;
      }
      case ExprKind::kCondExpr: {
        auto* c = static_cast<CondExpr*>(e);
        expr(c->test.get(), true);
        expr(c->then_expr.get(), true);
        expr(c->else_expr.get(), true);
        break;
      }
      case ExprKind::kBinary:
        expr(static_cast<BinaryExpr*>(e)->left.get(), soft);
        expr(static_cast<BinaryExpr*>(e)->right.get(), soft);
        break;
      case ExprKind::kUnary: expr(static_cast<UnaryExpr*>(e)->operand.get(), soft); break;
      case ExprKind::kCompare:
        expr(static_cast<CompareExpr*>(e)->first.get(), soft);
        for (auto& [op, rhs] : static_cast<CompareExpr*>(e)->ops) expr(rhs.get(), soft);
        break;
      case ExprKind::kConcat:
        for (auto& i : static_cast<ConcatExpr*>(e)->items) expr(i.get(), soft);
        break;
    }
  }
};

}  // namespace

void check_template(TemplateNode& root) {
  Checker().stmts(root.body, false, 0);
}

}  // namespace loom::text::jinja
