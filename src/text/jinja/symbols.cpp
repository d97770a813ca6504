#include "text/jinja/symbols.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace loom::text::jinja {
namespace {

// jinja2.idtracking.Symbols, with refs keyed by name (an ident is implied by the owning level).
struct Symbols {
  const Symbols* parent = nullptr;
  std::map<std::string, LoadKind> refs;  // names owned by this frame and their load instruction
  std::set<std::string> stores;

  bool find_ref(const std::string& name) const {
    for (const Symbols* s = this; s != nullptr; s = s->parent) {
      if (s->refs.count(name)) return true;
    }
    return false;
  }
  void store(const std::string& name) {
    stores.insert(name);
    if (refs.count(name)) return;
    if (parent != nullptr && parent->find_ref(name)) {
      refs[name] = LoadKind::kAlias;
      return;
    }
    refs[name] = LoadKind::kUndefined;
  }
  void declare_parameter(const std::string& name) {
    stores.insert(name);
    refs[name] = LoadKind::kParameter;
  }
  void load(const std::string& name) {
    if (!find_ref(name)) refs[name] = LoadKind::kResolve;
  }
  void branch_update(const std::vector<Symbols>& branches) {
    std::set<std::string> branch_stores;
    for (const auto& b : branches) branch_stores.insert(b.stores.begin(), b.stores.end());
    for (const auto& s : stores) branch_stores.erase(s);
    for (const auto& b : branches) {
      for (const auto& [name, load] : b.refs) refs[name] = load;
      stores.insert(b.stores.begin(), b.stores.end());
    }
    for (const auto& name : branch_stores) {
      refs[name] = (parent != nullptr && parent->find_ref(name)) ? LoadKind::kAlias : LoadKind::kResolve;
    }
  }
  FrameInfo to_frame() const {
    FrameInfo info;
    for (const auto& [name, load] : refs) info.decls.push_back({name, load});
    return info;
  }
};

// Every sub-expression of `e` (arguments of calls, filters and tests included), in the order
// jinja2's NodeVisitor.generic_visit walks them; leaves (constants, names, namespace refs) have none.
template <class Fn>
void for_each_child(const Expr* e, Fn&& visit) {
  auto call_args = [&](const CallArgsNode& a) {
    for (const auto& x : a.args) visit(x.get());
    for (const auto& kv : a.kwargs) visit(kv.second.get());
    visit(a.dyn_args.get());
    visit(a.dyn_kwargs.get());
  };
  switch (e->kind) {
    case ExprKind::kConst:
    case ExprKind::kName:
    case ExprKind::kNsRef: break;
    case ExprKind::kTuple:
      for (const auto& i : static_cast<const TupleExpr*>(e)->items) visit(i.get());
      break;
    case ExprKind::kList:
      for (const auto& i : static_cast<const ListExpr*>(e)->items) visit(i.get());
      break;
    case ExprKind::kDict:
      for (const auto& [k, v] : static_cast<const DictExpr*>(e)->items) {
        visit(k.get());
        visit(v.get());
      }
      break;
    case ExprKind::kGetattr: visit(static_cast<const GetattrExpr*>(e)->obj.get()); break;
    case ExprKind::kGetitem:
      visit(static_cast<const GetitemExpr*>(e)->obj.get());
      visit(static_cast<const GetitemExpr*>(e)->arg.get());
      break;
    case ExprKind::kSlice: {
      const auto* s = static_cast<const SliceExpr*>(e);
      visit(s->start.get());
      visit(s->stop.get());
      visit(s->step.get());
      break;
    }
    case ExprKind::kCall:
      visit(static_cast<const CallExpr*>(e)->callee.get());
      call_args(static_cast<const CallExpr*>(e)->args);
      break;
    case ExprKind::kFilter:
      visit(static_cast<const FilterExpr*>(e)->operand.get());
      call_args(static_cast<const FilterExpr*>(e)->args);
      break;
    case ExprKind::kTest:
      visit(static_cast<const TestExpr*>(e)->operand.get());
      call_args(static_cast<const TestExpr*>(e)->args);
      break;
    case ExprKind::kCondExpr: {
      const auto* c = static_cast<const CondExpr*>(e);
      visit(c->test.get());
      visit(c->then_expr.get());
      visit(c->else_expr.get());
      break;
    }
    case ExprKind::kBinary:
      visit(static_cast<const BinaryExpr*>(e)->left.get());
      visit(static_cast<const BinaryExpr*>(e)->right.get());
      break;
    case ExprKind::kUnary: visit(static_cast<const UnaryExpr*>(e)->operand.get()); break;
    case ExprKind::kCompare:
      visit(static_cast<const CompareExpr*>(e)->first.get());
      for (const auto& [op, rhs] : static_cast<const CompareExpr*>(e)->ops) visit(rhs.get());
      break;
    case ExprKind::kConcat:
      for (const auto& i : static_cast<const ConcatExpr*>(e)->items) visit(i.get());
      break;
  }
}

// jinja2.idtracking.FrameSymbolVisitor: the names one frame's own code touches.
class FrameVisitor {
 public:
  explicit FrameVisitor(Symbols* sym) : sym_(sym) {}

  void expr(const Expr* e, bool store_as_param = false) {
    if (e == nullptr) return;
    switch (e->kind) {
      case ExprKind::kConst: break;
      case ExprKind::kName: {
        const auto* n = static_cast<const NameExpr*>(e);
        if (store_as_param || n->ctx == NameCtx::kParam) {
          sym_->declare_parameter(n->name);
        } else if (n->ctx == NameCtx::kStore) {
          sym_->store(n->name);
        } else {
          sym_->load(n->name);
        }
        break;
      }
      case ExprKind::kNsRef: sym_->load(static_cast<const NsRefExpr*>(e)->name); break;
      case ExprKind::kTuple:  // an unpacking target passes the parameter context on
        for (const auto& i : static_cast<const TupleExpr*>(e)->items) expr(i.get(), store_as_param);
        break;
      default: for_each_child(e, [this](const Expr* c) { expr(c); });
    }
  }

  void args(const CallArgsNode& a) {
    for (const auto& e : a.args) expr(e.get());
    for (const auto& kv : a.kwargs) expr(kv.second.get());
    expr(a.dyn_args.get());
    expr(a.dyn_kwargs.get());
  }

  void stmts(const StmtList& list) {
    for (const auto& s : list) stmt(*s);
  }

  void stmt(const Stmt& s) {
    switch (s.kind) {
      case StmtKind::kOutput:
        for (const auto& item : static_cast<const OutputStmt&>(s).items) expr(item.expr.get());
        break;
      case StmtKind::kIf: visit_if(static_cast<const IfStmt&>(s)); break;
      case StmtKind::kMacro: sym_->store(static_cast<const MacroStmt&>(s).def->name); break;
      case StmtKind::kAssign:
        expr(static_cast<const AssignStmt&>(s).value.get());
        expr(static_cast<const AssignStmt&>(s).target.get());
        break;
      case StmtKind::kFor: expr(static_cast<const ForStmt&>(s).iter.get()); break;
      case StmtKind::kCallBlock: {
        const auto& c = static_cast<const CallBlockStmt&>(s);
        if (c.call) expr(c.call.get());
        break;
      }
      case StmtKind::kFilterBlock: expr(static_cast<const FilterBlockStmt&>(s).filter.get()); break;
      case StmtKind::kWith:
        for (const auto& v : static_cast<const WithStmt&>(s).values) expr(v.get());
        break;
      case StmtKind::kAssignBlock: expr(static_cast<const AssignBlockStmt&>(s).target.get()); break;
      case StmtKind::kTemplateLoad: expr(static_cast<const TemplateLoadStmt&>(s).name.get()); break;
      case StmtKind::kBlock:  // FrameSymbolVisitor does not look into blocks
      case StmtKind::kBreak:
      case StmtKind::kContinue: break;
    }
  }

 private:
  // One jinja2 If node: test, body, elif list, else; the elif nodes are If nodes of their own.
  void visit_if(const IfStmt& node) { visit_if_from(node, 0); }

  void visit_if_from(const IfStmt& node, size_t index) {
    expr(node.branches[index].first.get());
    Symbols* original = sym_;
    auto inner = [&](auto&& body_fn) {
      Symbols copy = *original;
      sym_ = &copy;
      body_fn();
      sym_ = original;
      return copy;
    };
    std::vector<Symbols> branches;
    branches.push_back(inner([&] { stmts(node.branches[index].second); }));
    if (index == 0) {
      branches.push_back(inner([&] {
        for (size_t i = 1; i < node.branches.size(); ++i) visit_if_from(node, i);
      }));
      branches.push_back(inner([&] { stmts(node.else_body); }));
    } else {
      branches.push_back(inner([] {}));
      branches.push_back(inner([] {}));
    }
    sym_->branch_update(branches);
  }

  Symbols* sym_;
};

// jinja2.visitor + UndeclaredNameVisitor: which of `names` are read before being declared.
class UndeclaredFinder {
 public:
  explicit UndeclaredFinder(std::set<std::string> names) : names_(std::move(names)) {}
  std::set<std::string> found;

  void expr(const Expr* e) {
    if (e == nullptr) return;
    switch (e->kind) {
      case ExprKind::kName: {
        const auto* n = static_cast<const NameExpr*>(e);
        if (n->ctx == NameCtx::kLoad && names_.count(n->name)) {
          found.insert(n->name);
        } else {
          names_.erase(n->name);
        }
        break;
      }
      default: for_each_child(e, [this](const Expr* c) { expr(c); });
    }
  }

  void args(const CallArgsNode& a) {
    for (const auto& e : a.args) expr(e.get());
    for (const auto& kv : a.kwargs) expr(kv.second.get());
    expr(a.dyn_args.get());
    expr(a.dyn_kwargs.get());
  }

  void macro(const MacroDef& def) {
    for (const auto& d : def.defaults) expr(d.get());
    stmts(def.body);
  }

  void stmts(const StmtList& list) {
    for (const auto& s : list) stmt(*s);
  }

  void stmt(const Stmt& s) {
    switch (s.kind) {
      case StmtKind::kOutput:
        for (const auto& item : static_cast<const OutputStmt&>(s).items) expr(item.expr.get());
        break;
      case StmtKind::kFor: {
        const auto& f = static_cast<const ForStmt&>(s);
        expr(f.target.get());
        expr(f.iter.get());
        stmts(f.body);
        stmts(f.else_body);
        expr(f.filter.get());
        break;
      }
      case StmtKind::kIf: {
        const auto& f = static_cast<const IfStmt&>(s);
        expr(f.branches[0].first.get());
        stmts(f.branches[0].second);
        for (size_t i = 1; i < f.branches.size(); ++i) {
          expr(f.branches[i].first.get());
          stmts(f.branches[i].second);
        }
        stmts(f.else_body);
        break;
      }
      case StmtKind::kMacro: {
        const auto& def = *static_cast<const MacroStmt&>(s).def;
        for (const auto& p : def.params) names_.erase(p);
        macro(def);
        break;
      }
      case StmtKind::kCallBlock: {
        const auto& c = static_cast<const CallBlockStmt&>(s);
        if (c.call) expr(c.call.get());
        for (const auto& p : c.caller->params) names_.erase(p);
        macro(*c.caller);
        break;
      }
      case StmtKind::kFilterBlock:
        stmts(static_cast<const FilterBlockStmt&>(s).body);
        expr(static_cast<const FilterBlockStmt&>(s).filter.get());
        break;
      case StmtKind::kWith: {
        const auto& w = static_cast<const WithStmt&>(s);
        for (const auto& t : w.targets) expr(t.get());
        for (const auto& v : w.values) expr(v.get());
        stmts(w.body);
        break;
      }
      case StmtKind::kAssign:
        expr(static_cast<const AssignStmt&>(s).target.get());
        expr(static_cast<const AssignStmt&>(s).value.get());
        break;
      case StmtKind::kAssignBlock:
        expr(static_cast<const AssignBlockStmt&>(s).target.get());
        expr(static_cast<const AssignBlockStmt&>(s).filter.get());
        stmts(static_cast<const AssignBlockStmt&>(s).body);
        break;
      case StmtKind::kTemplateLoad: expr(static_cast<const TemplateLoadStmt&>(s).name.get()); break;
      case StmtKind::kBlock:  // jinja2's UndeclaredNameVisitor stops at blocks
      case StmtKind::kBreak:
      case StmtKind::kContinue: break;
    }
  }

 private:
  std::set<std::string> names_;
};

void analyze_nested(const StmtList& list, const Symbols& parent);

// Frames opened by statements of one frame: recurse into if-branches (same frame), stop at nested
// frame owners, which get analysed with this frame as parent.
void analyze_children(const StmtList& list, const Symbols& parent) {
  analyze_nested(list, parent);
}

void analyze_macro(MacroDef& def, const Symbols& parent) {
  Symbols sym;
  sym.parent = &parent;
  FrameVisitor v(&sym);
  for (const auto& p : def.params) sym.declare_parameter(p);
  for (const auto& d : def.defaults) v.expr(d.get());
  v.stmts(def.body);
  UndeclaredFinder finder({"caller", "kwargs", "varargs"});
  finder.stmts(def.body);
  bool explicit_caller = false;
  for (const auto& p : def.params) explicit_caller |= p == "caller";
  if (finder.found.count("caller") && !explicit_caller) {
    sym.declare_parameter("caller");
    def.accesses_caller = true;
  }
  auto has_param = [&](const char* n) {
    for (const auto& p : def.params) {
      if (p == n) return true;
    }
    return false;
  };
  if (finder.found.count("kwargs") && !has_param("kwargs")) {
    sym.declare_parameter("kwargs");
    def.catch_kwargs = true;
  }
  if (finder.found.count("varargs") && !has_param("varargs")) {
    sym.declare_parameter("varargs");
    def.catch_varargs = true;
  }
  def.frame = sym.to_frame();
  analyze_children(def.body, sym);
}

void analyze_nested(const StmtList& list, const Symbols& parent) {
  for (const auto& sp : list) {
    Stmt& s = *sp;
    switch (s.kind) {
      case StmtKind::kIf: {
        auto& f = static_cast<IfStmt&>(s);
        for (auto& [test, body] : f.branches) analyze_nested(body, parent);
        analyze_nested(f.else_body, parent);
        break;
      }
      case StmtKind::kFor: {
        auto& f = static_cast<ForStmt&>(s);
        {
          Symbols body;
          body.parent = &parent;
          body.declare_parameter("loop");
          FrameVisitor v(&body);
          v.expr(f.target.get(), true);
          v.stmts(f.body);
          f.body_frame = body.to_frame();
          analyze_children(f.body, body);
        }
        {
          Symbols else_sym;
          else_sym.parent = &parent;
          FrameVisitor v(&else_sym);
          v.stmts(f.else_body);
          f.else_frame = else_sym.to_frame();
          analyze_children(f.else_body, else_sym);
        }
        if (f.filter) {
          Symbols test;
          test.parent = &parent;
          FrameVisitor v(&test);
          v.expr(f.target.get(), true);
          v.expr(f.filter.get());
          f.test_frame = test.to_frame();
        }
        break;
      }
      case StmtKind::kMacro: analyze_macro(*static_cast<MacroStmt&>(s).def, parent); break;
      case StmtKind::kBlock: {
        // A block function gets a fresh frame (no parent): its names resolve through the context.
        auto& b = static_cast<BlockStmt&>(s);
        Symbols sym;
        FrameVisitor v(&sym);
        v.stmts(b.body);
        b.frame = sym.to_frame();
        analyze_children(b.body, sym);
        break;
      }
      case StmtKind::kCallBlock: analyze_macro(*static_cast<CallBlockStmt&>(s).caller, parent); break;
      case StmtKind::kFilterBlock: {
        auto& f = static_cast<FilterBlockStmt&>(s);
        Symbols sym;
        sym.parent = &parent;
        FrameVisitor v(&sym);
        v.stmts(f.body);
        v.expr(f.filter.get());
        f.frame = sym.to_frame();
        analyze_children(f.body, sym);
        break;
      }
      case StmtKind::kWith: {
        auto& w = static_cast<WithStmt&>(s);
        Symbols sym;
        sym.parent = &parent;
        FrameVisitor v(&sym);
        for (const auto& t : w.targets) v.expr(t.get());
        v.stmts(w.body);
        w.frame = sym.to_frame();
        analyze_children(w.body, sym);
        break;
      }
      case StmtKind::kAssignBlock: {
        auto& a = static_cast<AssignBlockStmt&>(s);
        Symbols sym;
        sym.parent = &parent;
        FrameVisitor v(&sym);
        v.stmts(a.body);
        if (a.filter) v.expr(a.filter.get());  // evaluated in the block frame
        a.frame = sym.to_frame();
        analyze_children(a.body, sym);
        break;
      }
      default: break;
    }
  }
}

}  // namespace

void analyze_symbols(TemplateNode& root) {
  Symbols sym;
  FrameVisitor v(&sym);
  v.stmts(root.body);
  root.frame = sym.to_frame();
  analyze_nested(root.body, sym);
}

}  // namespace loom::text::jinja
