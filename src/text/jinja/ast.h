// Template syntax tree, shaped after jinja2.nodes (one node type per jinja2 node the parser builds).
// Nodes are immutable after parsing and symbol analysis; a parsed template can render concurrently.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace loom::text::jinja {

// ---- Frames (variable scopes) ----
//
// jinja2 decides statically (jinja2/idtracking.py) which names a frame owns and how each is
// initialised when the frame is entered; the result is observable (e.g. a root-level {% set x %} makes
// `x` undefined inside an earlier loop even when the caller passed x). symbols.cpp reproduces that
// analysis; the interpreter creates one runtime frame per FrameInfo entry.
enum class LoadKind {
  kParameter,  // bound by the frame's owner (loop target, macro argument, `loop`, `caller`, ...)
  kResolve,    // looked up in the render context (caller variables and globals) on entry
  kAlias,      // copied from the enclosing frames on entry
  kUndefined,  // starts missing (reads give Undefined until assigned)
};

struct FrameDecl {
  std::string name;
  LoadKind load;
};

struct FrameInfo {
  std::vector<FrameDecl> decls;
  int find(std::string_view name) const {
    for (size_t i = 0; i < decls.size(); ++i) {
      if (decls[i].name == name) return static_cast<int>(i);
    }
    return -1;
  }
};

// ---- Expressions ----

enum class ExprKind {
  kConst,
  kName,
  kTuple,
  kList,
  kDict,
  kGetattr,
  kGetitem,
  kSlice,
  kCall,
  kFilter,
  kTest,
  kCondExpr,
  kBinary,
  kUnary,
  kCompare,
  kConcat,
  kNsRef,
};

enum class NameCtx { kLoad, kStore, kParam };
enum class BinaryOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow, kAnd, kOr };
enum class UnaryOp { kNeg, kPos, kNot };
enum class CompareOp { kEq, kNe, kLt, kLtEq, kGt, kGtEq, kIn, kNotIn };

struct Expr {
  Expr(ExprKind k, int l) : kind(k), line(l) {}
  virtual ~Expr() = default;
  ExprKind kind;
  int line;
};
using ExprPtr = std::unique_ptr<Expr>;

struct ConstExpr final : Expr {
  ConstExpr(Value v, int l) : Expr(ExprKind::kConst, l), value(std::move(v)) {}
  Value value;
};

struct NameExpr final : Expr {
  NameExpr(std::string n, NameCtx c, int l) : Expr(ExprKind::kName, l), name(std::move(n)), ctx(c) {}
  std::string name;
  NameCtx ctx;
};

struct TupleExpr final : Expr {
  explicit TupleExpr(int l) : Expr(ExprKind::kTuple, l) {}
  std::vector<ExprPtr> items;
  NameCtx ctx = NameCtx::kLoad;
};

struct ListExpr final : Expr {
  explicit ListExpr(int l) : Expr(ExprKind::kList, l) {}
  std::vector<ExprPtr> items;
};

struct DictExpr final : Expr {
  explicit DictExpr(int l) : Expr(ExprKind::kDict, l) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

struct GetattrExpr final : Expr {
  GetattrExpr(ExprPtr o, std::string a, int l)
      : Expr(ExprKind::kGetattr, l), obj(std::move(o)), attr(std::move(a)) {}
  ExprPtr obj;
  std::string attr;
};

struct GetitemExpr final : Expr {
  GetitemExpr(ExprPtr o, ExprPtr a, int l)
      : Expr(ExprKind::kGetitem, l), obj(std::move(o)), arg(std::move(a)) {}
  ExprPtr obj;
  ExprPtr arg;  // may be a SliceExpr
};

struct SliceExpr final : Expr {
  explicit SliceExpr(int l) : Expr(ExprKind::kSlice, l) {}
  ExprPtr start, stop, step;  // each may be null
};

struct CallArgsNode {
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  ExprPtr dyn_args;    // *args
  ExprPtr dyn_kwargs;  // **kwargs
};

struct CallExpr final : Expr {
  CallExpr(ExprPtr c, int l) : Expr(ExprKind::kCall, l), callee(std::move(c)) {}
  ExprPtr callee;
  CallArgsNode args;
};

class Interpreter;
using FilterFn = Value (*)(Interpreter& interp, const Value& operand, CallArgs& args);
using TestFn = bool (*)(Interpreter& interp, const Value& operand, CallArgs& args);

struct FilterExpr final : Expr {
  FilterExpr(ExprPtr o, std::string n, int l)
      : Expr(ExprKind::kFilter, l), operand(std::move(o)), name(std::move(n)) {}
  ExprPtr operand;  // null for the innermost filter of a {% filter %} block or {% set %} block
  std::string name;
  CallArgsNode args;
  FilterFn fn = nullptr;  // null: unknown filter, raised when evaluated (allowed inside if / cond-expr)
};

struct TestExpr final : Expr {
  TestExpr(ExprPtr o, std::string n, int l)
      : Expr(ExprKind::kTest, l), operand(std::move(o)), name(std::move(n)) {}
  ExprPtr operand;
  std::string name;
  CallArgsNode args;
  TestFn fn = nullptr;
};

struct CondExpr final : Expr {
  explicit CondExpr(int l) : Expr(ExprKind::kCondExpr, l) {}
  ExprPtr test, then_expr, else_expr;  // else_expr may be null
};

struct BinaryExpr final : Expr {
  BinaryExpr(BinaryOp o, ExprPtr a, ExprPtr b, int l)
      : Expr(ExprKind::kBinary, l), op(o), left(std::move(a)), right(std::move(b)) {}
  BinaryOp op;
  ExprPtr left, right;
};

struct UnaryExpr final : Expr {
  UnaryExpr(UnaryOp o, ExprPtr e, int l) : Expr(ExprKind::kUnary, l), op(o), operand(std::move(e)) {}
  UnaryOp op;
  ExprPtr operand;
};

struct CompareExpr final : Expr {
  CompareExpr(ExprPtr f, int l) : Expr(ExprKind::kCompare, l), first(std::move(f)) {}
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> ops;
};

struct ConcatExpr final : Expr {
  explicit ConcatExpr(int l) : Expr(ExprKind::kConcat, l) {}
  std::vector<ExprPtr> items;
};

// `ns.attr` as an assignment target.
struct NsRefExpr final : Expr {
  NsRefExpr(std::string n, std::string a, int l)
      : Expr(ExprKind::kNsRef, l), name(std::move(n)), attr(std::move(a)) {}
  std::string name, attr;
};

// ---- Statements ----

enum class StmtKind {
  kOutput,
  kFor,
  kIf,
  kMacro,
  kCallBlock,
  kFilterBlock,
  kWith,
  kAssign,
  kAssignBlock,
  kBreak,
  kContinue,
  kTemplateLoad,  // include / import / from-import / extends: parsed, but there is no template loader
  kBlock,
};

struct Stmt {
  Stmt(StmtKind k, int l) : kind(k), line(l) {}
  virtual ~Stmt() = default;
  StmtKind kind;
  int line;
};
using StmtPtr = std::unique_ptr<Stmt>;
using StmtList = std::vector<StmtPtr>;

struct OutputItem {
  std::string text;  // literal template data when expr is null
  ExprPtr expr;
};

struct OutputStmt final : Stmt {
  explicit OutputStmt(int l) : Stmt(StmtKind::kOutput, l) {}
  std::vector<OutputItem> items;
};

struct ForStmt final : Stmt {
  explicit ForStmt(int l) : Stmt(StmtKind::kFor, l) {}
  ExprPtr target;  // NameExpr or TupleExpr of names
  ExprPtr iter;
  StmtList body;
  StmtList else_body;
  ExprPtr filter;  // `for x in y if cond`
  bool recursive = false;
  FrameInfo body_frame, else_frame, test_frame;
};

struct IfStmt final : Stmt {
  explicit IfStmt(int l) : Stmt(StmtKind::kIf, l) {}
  std::vector<std::pair<ExprPtr, StmtList>> branches;  // if + elifs, in order
  StmtList else_body;
};

// A macro, or the anonymous `caller` of a {% call %} block.
struct MacroDef {
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // aligned to the last params
  StmtList body;
  FrameInfo frame;
  bool catch_kwargs = false;   // body reads `kwargs`
  bool catch_varargs = false;  // body reads `varargs`
  bool accesses_caller = false;
  int line = 0;
};

struct MacroStmt final : Stmt {
  explicit MacroStmt(int l) : Stmt(StmtKind::kMacro, l) {}
  std::shared_ptr<MacroDef> def;
};

// {% call [(args)] callee(...) %}body{% endcall %}. transformers' {% generation %} block is a call block
// without a callee: its body is rendered in its own frame and output as is.
struct CallBlockStmt final : Stmt {
  explicit CallBlockStmt(int l) : Stmt(StmtKind::kCallBlock, l) {}
  std::unique_ptr<CallExpr> call;  // null for {% generation %}
  std::shared_ptr<MacroDef> caller;
};

struct FilterBlockStmt final : Stmt {
  explicit FilterBlockStmt(int l) : Stmt(StmtKind::kFilterBlock, l) {}
  ExprPtr filter;  // FilterExpr chain whose innermost operand is null (the rendered body)
  StmtList body;
  FrameInfo frame;
};

struct WithStmt final : Stmt {
  explicit WithStmt(int l) : Stmt(StmtKind::kWith, l) {}
  std::vector<ExprPtr> targets;
  std::vector<ExprPtr> values;
  StmtList body;
  FrameInfo frame;
};

struct AssignStmt final : Stmt {
  explicit AssignStmt(int l) : Stmt(StmtKind::kAssign, l) {}
  ExprPtr target;  // NameExpr, TupleExpr or NsRefExpr
  ExprPtr value;
};

struct AssignBlockStmt final : Stmt {
  explicit AssignBlockStmt(int l) : Stmt(StmtKind::kAssignBlock, l) {}
  ExprPtr target;
  ExprPtr filter;  // may be null
  StmtList body;
  FrameInfo frame;
};

struct LoopControlStmt final : Stmt {
  LoopControlStmt(StmtKind k, int l) : Stmt(k, l) {}
};

// transformers' environment has no loader: these tags compile, and fail when they run.
struct TemplateLoadStmt final : Stmt {
  TemplateLoadStmt(std::string t, int l) : Stmt(StmtKind::kTemplateLoad, l), tag(std::move(t)) {}
  std::string tag;
  ExprPtr name;  // the template name expression (evaluated before failing, as jinja2 does)
};

// {% block name [scoped] %}: without template inheritance a block renders in place, in a fresh frame
// that sees the render context and root-level assignments (plus the enclosing locals when scoped).
struct BlockStmt final : Stmt {
  explicit BlockStmt(int l) : Stmt(StmtKind::kBlock, l) {}
  std::string name;
  bool scoped = false;
  StmtList body;
  FrameInfo frame;
};

struct TemplateNode {
  StmtList body;
  FrameInfo frame;
};

}  // namespace loom::text::jinja
