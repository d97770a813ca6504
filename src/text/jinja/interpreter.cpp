#include "text/jinja/interpreter.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "text/jinja/builtins.h"
#include "text/jinja/error.h"
#include "text/jinja/objects.h"
#include "text/jinja/ops.h"

namespace loom::text::jinja {
namespace {

// Keeps macro / recursive-loop nesting bounded (a recursive macro would otherwise exhaust the stack).
class DepthGuard {
 public:
  DepthGuard(int* depth, int limit) : depth_(depth) {
    if (++*depth_ > limit) {
      --*depth_;
      throw TemplateError(ErrorKind::kLimit, "maximum recursion depth exceeded (" + std::to_string(limit) +
                                                 " nested macro or loop calls)");
    }
  }
  ~DepthGuard() { --*depth_; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;

 private:
  int* depth_;
};

template <typename Fn>
auto with_line(int line, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (TemplateError& e) {
    if (e.line() == 0) e.set_location(line);
    throw;
  }
}

}  // namespace

Interpreter::Interpreter(const TemplateNode& root, const RenderVars& vars, const RenderOptions& options)
    : root_(root), vars_(vars), options_(options) {}

std::string Interpreter::render() {
  root_frame_ = enter_frame(root_.frame, nullptr);
  std::string out;
  exec_list(root_.body, root_frame_, out);
  root_frame_.reset();
  return out;
}

// ---- frames and names ----

bool Interpreter::resolve(const std::string& name, Value* out) const {
  auto it = vars_.find(name);
  if (it != vars_.end()) {
    *out = it->second;
    return true;
  }
  return find_global(name, out);
}

FramePtr Interpreter::enter_frame(const FrameInfo& info, FramePtr parent) {
  auto frame = std::make_shared<Frame>();
  frame->info = &info;
  frame->parent = std::move(parent);
  frame->slots.resize(info.decls.size());
  for (size_t i = 0; i < info.decls.size(); ++i) {
    const FrameDecl& decl = info.decls[i];
    switch (decl.load) {
      case LoadKind::kParameter:
      case LoadKind::kUndefined: break;
      case LoadKind::kResolve: {
        Value v;
        if (resolve(decl.name, &v)) frame->slots[i] = std::move(v);
        break;
      }
      case LoadKind::kAlias: {
        bool found = false;
        for (const Frame* p = frame->parent.get(); p != nullptr && !found; p = p->parent.get()) {
          int k = p->info->find(decl.name);
          if (k >= 0) {
            frame->slots[i] = p->slots[static_cast<size_t>(k)];
            found = true;
          }
        }
        Value v;
        if (!found && resolve(decl.name, &v)) frame->slots[i] = std::move(v);
        break;
      }
    }
  }
  return frame;
}

FramePtr Interpreter::enter_block_frame(const BlockStmt& node, const FramePtr& enclosing) {
  auto frame = std::make_shared<Frame>();
  frame->info = &node.frame;
  frame->slots.resize(node.frame.decls.size());
  for (size_t i = 0; i < node.frame.decls.size(); ++i) {
    const FrameDecl& decl = node.frame.decls[i];
    if (decl.load != LoadKind::kResolve) continue;
    bool found = false;
    const Frame* start = node.scoped ? enclosing.get() : root_frame_.get();
    for (const Frame* p = start; p != nullptr && !found; p = node.scoped ? p->parent.get() : nullptr) {
      int k = p->info->find(decl.name);
      if (k >= 0 && p->slots[static_cast<size_t>(k)].has_value()) {
        frame->slots[i] = p->slots[static_cast<size_t>(k)];
        found = true;
      }
    }
    Value v;
    if (!found && resolve(decl.name, &v)) frame->slots[i] = std::move(v);
  }
  return frame;
}

Value Interpreter::lookup(const Frame& frame, const std::string& name) const {
  for (const Frame* f = &frame; f != nullptr; f = f->parent.get()) {
    int k = f->info->find(name);
    if (k >= 0) {
      const auto& slot = f->slots[static_cast<size_t>(k)];
      return slot.has_value() ? *slot : Value::undefined(name);
    }
  }
  Value v;
  if (resolve(name, &v)) return v;
  return Value::undefined(name);
}

void Interpreter::bind(Frame& frame, const std::string& name, Value value) const {
  int k = frame.info->find(name);
  LOOM_CHECK(k >= 0) << "symbol analysis did not declare '" << name << "' in the assigning frame";
  frame.slots[static_cast<size_t>(k)] = std::move(value);
}

void Interpreter::assign(const Expr& target, const Value& value, Frame& frame) {
  switch (target.kind) {
    case ExprKind::kName: bind(frame, static_cast<const NameExpr&>(target).name, value); return;
    case ExprKind::kTuple: {
      const auto& items = static_cast<const TupleExpr&>(target).items;
      std::vector<Value> parts = unpack(value, items.size());
      for (size_t i = 0; i < items.size(); ++i) assign(*items[i], parts[i], frame);
      return;
    }
    case ExprKind::kNsRef: {
      const auto& ref = static_cast<const NsRefExpr&>(target);
      Value ns = lookup(frame, ref.name);
      auto* obj = ns.object_as<NamespaceObject>();
      if (obj == nullptr)
        throw TemplateError(ErrorKind::kRuntime, "cannot assign attribute on non-namespace object");
      obj->set(ref.attr, value);
      return;
    }
    default: LOOM_CHECK(false) << "parser produced an unassignable target";
  }
}

void Interpreter::append_output(std::string& out, std::string_view text) const {
  if (out.size() + text.size() > options_.max_output_bytes) {
    throw TemplateError(ErrorKind::kLimit,
                        "template output exceeds " + std::to_string(options_.max_output_bytes) + " bytes");
  }
  out.append(text);
}

// ---- statements ----

Interpreter::Flow Interpreter::exec_list(const StmtList& list, const FramePtr& frame, std::string& out) {
  for (const auto& s : list) {
    Flow f = exec(*s, frame, out);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec(const Stmt& stmt, const FramePtr& frame, std::string& out) {
  return with_line(stmt.line, [&]() -> Flow {
    switch (stmt.kind) {
      case StmtKind::kOutput:
        for (const auto& item : static_cast<const OutputStmt&>(stmt).items) {
          if (item.expr) {
            Value v = eval(*item.expr, frame);
            if (v.is_string()) {
              append_output(out, v.as_string());
            } else {
              append_output(out, to_str(v));
            }
          } else {
            append_output(out, item.text);
          }
        }
        return Flow::kNormal;
      case StmtKind::kIf: {
        const auto& node = static_cast<const IfStmt&>(stmt);
        for (const auto& [test, body] : node.branches) {
          if (truthy(eval(*test, frame))) return exec_list(body, frame, out);
        }
        return exec_list(node.else_body, frame, out);
      }
      case StmtKind::kFor: {
        const auto& node = static_cast<const ForStmt&>(stmt);
        exec_for(node, frame, eval(*node.iter, frame), 0, out);
        return Flow::kNormal;
      }
      case StmtKind::kAssign: {
        const auto& node = static_cast<const AssignStmt&>(stmt);
        assign(*node.target, eval(*node.value, frame), *frame);
        return Flow::kNormal;
      }
      case StmtKind::kMacro: {
        const auto& def = *static_cast<const MacroStmt&>(stmt).def;
        bind(*frame, def.name, Value::object(std::make_shared<MacroObject>(&def, frame)));
        return Flow::kNormal;
      }
      case StmtKind::kCallBlock:
        exec_call_block(static_cast<const CallBlockStmt&>(stmt), frame, out);
        return Flow::kNormal;
      case StmtKind::kFilterBlock: {
        const auto& node = static_cast<const FilterBlockStmt&>(stmt);
        FramePtr inner = enter_frame(node.frame, frame);
        std::string body;
        Flow f = exec_list(node.body, inner, body);
        if (f != Flow::kNormal) return f;
        Value v = Value::string(std::move(body));
        append_output(out, to_str(eval_filter(static_cast<const FilterExpr&>(*node.filter), inner, &v)));
        return Flow::kNormal;
      }
      case StmtKind::kWith: {
        const auto& node = static_cast<const WithStmt&>(stmt);
        FramePtr inner = enter_frame(node.frame, frame);
        for (size_t i = 0; i < node.targets.size(); ++i)
          assign(*node.targets[i], eval(*node.values[i], frame), *inner);
        return exec_list(node.body, inner, out);
      }
      case StmtKind::kAssignBlock: {
        const auto& node = static_cast<const AssignBlockStmt&>(stmt);
        FramePtr inner = enter_frame(node.frame, frame);
        std::string body;
        Flow f = exec_list(node.body, inner, body);
        if (f != Flow::kNormal) return f;
        Value v = Value::string(std::move(body));
        if (node.filter) v = eval_filter(static_cast<const FilterExpr&>(*node.filter), inner, &v);
        assign(*node.target, v, *frame);
        return Flow::kNormal;
      }
      case StmtKind::kBlock: {
        const auto& node = static_cast<const BlockStmt&>(stmt);
        FramePtr inner = enter_block_frame(node, frame);
        exec_list(node.body, inner, out);
        return Flow::kNormal;
      }
      case StmtKind::kTemplateLoad:
        eval(*static_cast<const TemplateLoadStmt&>(stmt).name, frame);
        throw_type_error("no loader for this environment specified");
      case StmtKind::kBreak: return Flow::kBreak;
      case StmtKind::kContinue: return Flow::kContinue;
    }
    return Flow::kNormal;
  });
}

void Interpreter::exec_for(const ForStmt& node, const FramePtr& frame, const Value& iterable, int depth0,
                           std::string& out) {
  LoopObject::Filter filter;
  if (node.filter) {
    filter = [this, &node, frame](const Value& item) {
      FramePtr test = enter_frame(node.test_frame, frame);
      assign(*node.target, item, *test);
      return truthy(eval(*node.filter, test));
    };
  }
  auto loop = std::make_shared<LoopObject>(iterate(iterable), std::move(filter), depth0, &node, frame);
  Value loop_value = Value::object(loop);
  // jinja2 clears its "no iteration" flag at the end of the loop body, so iterations that end in
  // {% continue %} or {% break %} leave it set and the else block still runs.
  bool run_else = true;
  for (size_t i = 0; loop->fetch(i); ++i) {
    loop->set_index(i);
    Value item = loop->item(i);  // copied: later fetches may grow the item buffer
    FramePtr body = enter_frame(node.body_frame, frame);
    bind(*body, "loop", loop_value);
    assign(*node.target, item, *body);
    Flow flow = exec_list(node.body, body, out);
    if (flow == Flow::kBreak) break;
    if (flow == Flow::kContinue) continue;
    run_else = false;
  }
  if (run_else && !node.else_body.empty()) {
    FramePtr else_frame = enter_frame(node.else_frame, frame);
    exec_list(node.else_body, else_frame, out);
  }
}

Value Interpreter::recurse_loop(const ForStmt& node, const FramePtr& frame, const Value& iterable,
                                int depth0) {
  DepthGuard guard(&depth_, options_.max_call_depth);
  std::string out;
  exec_for(node, frame, iterable, depth0, out);
  return Value::string(std::move(out));
}

void Interpreter::exec_call_block(const CallBlockStmt& node, const FramePtr& frame, std::string& out) {
  if (!node.call) {  // {% generation %}: transformers renders caller() unchanged
    CallArgs none;
    append_output(out, to_str(invoke_macro(*node.caller, frame, none)));
    return;
  }
  Value callee = eval(*node.call->callee, frame);
  CallArgs args = eval_args(node.call->args, frame);
  args.kwargs.emplace_back("caller", Value::object(std::make_shared<MacroObject>(node.caller.get(), frame)));
  append_output(out, to_str(with_line(node.call->line, [&] { return call(callee, args); })));
}

Value Interpreter::invoke_macro(const MacroDef& def, const FramePtr& closure, CallArgs& args) {
  DepthGuard guard(&depth_, options_.max_call_depth);
  const size_t n = def.params.size();
  std::vector<std::optional<Value>> argv(n);
  const size_t off = std::min(args.args.size(), n);
  for (size_t i = 0; i < off; ++i) argv[i] = args.args[i];
  std::vector<std::pair<std::string, Value>> kwargs = args.kwargs;
  auto pop = [&](const std::string& name) -> std::optional<Value> {
    for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
      if (it->first == name) {
        Value v = std::move(it->second);
        kwargs.erase(it);
        return v;
      }
    }
    return std::nullopt;
  };
  bool found_caller = false;
  if (off != n) {
    for (size_t i = off; i < n; ++i) {
      argv[i] = pop(def.params[i]);
      if (def.params[i] == "caller") found_caller = true;
    }
  } else {
    found_caller = std::find(def.params.begin(), def.params.end(), "caller") != def.params.end();
  }
  std::optional<Value> caller;
  if (def.accesses_caller && !found_caller) {
    caller = pop("caller");
    if (!caller || caller->is_none()) caller = Value::undefined_hint("No caller defined");
  }
  Value kwargs_value;
  if (def.catch_kwargs) {
    auto d = std::make_shared<DictData>();
    for (auto& [k, v] : kwargs) d->insert_or_assign(Value::string(k), v);
    kwargs_value = Value::dict(std::move(d));
  } else if (!kwargs.empty()) {
    for (const auto& kv : kwargs) {
      if (kv.first == "caller") {
        throw_type_error(
            "macro " + str_repr(def.name) +
            " was invoked with two values for the special caller argument. This is most likely a bug.");
      }
    }
    throw_type_error("macro " + str_repr(def.name) + " takes no keyword argument " +
                     str_repr(kwargs.front().first));
  }
  Value varargs_value;
  if (def.catch_varargs) {
    std::vector<Value> extra;
    if (args.args.size() > n)
      extra.assign(args.args.begin() + static_cast<std::ptrdiff_t>(n), args.args.end());
    varargs_value = Value::tuple(std::move(extra));
  } else if (args.args.size() > n) {
    throw_type_error("macro " + str_repr(def.name) + " takes not more than " + std::to_string(n) +
                     " argument(s)");
  }

  FramePtr frame = enter_frame(def.frame, closure);
  for (size_t i = 0; i < n; ++i) {
    if (argv[i]) bind(*frame, def.params[i], *argv[i]);
  }
  const size_t first_default = n - def.defaults.size();
  for (size_t i = 0; i < n; ++i) {
    if (argv[i]) continue;
    if (i >= first_default) {
      bind(*frame, def.params[i], eval(*def.defaults[i - first_default], frame));
    } else {
      bind(*frame, def.params[i],
           Value::undefined_hint("parameter " + str_repr(def.params[i]) + " was not provided"));
    }
  }
  if (def.accesses_caller && caller) bind(*frame, "caller", *caller);
  if (def.catch_kwargs) bind(*frame, "kwargs", kwargs_value);
  if (def.catch_varargs) bind(*frame, "varargs", varargs_value);
  std::string out;
  exec_list(def.body, frame, out);
  return Value::string(std::move(out));
}

// ---- expressions ----

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) callee.fail_undefined();
  if (callee.is_object() && callee.as_object().callable()) return callee.as_object().call(*this, args);
  throw_type_error("'" + callee.type_name() + "' object is not callable");
}

Value Interpreter::apply_filter(const std::string& name, const Value& operand, CallArgs& args) {
  FilterFn fn = find_filter(name);
  if (fn == nullptr) throw TemplateError(ErrorKind::kRuntime, "No filter named " + str_repr(name) + ".");
  return fn(*this, operand, args);
}

bool Interpreter::apply_test(const std::string& name, const Value& operand, CallArgs& args) {
  TestFn fn = find_test(name);
  if (fn == nullptr) throw TemplateError(ErrorKind::kRuntime, "No test named " + str_repr(name) + ".");
  return fn(*this, operand, args);
}

CallArgs Interpreter::eval_args(const CallArgsNode& node, const FramePtr& frame) {
  CallArgs out;
  for (const auto& a : node.args) out.args.push_back(eval(*a, frame));
  if (node.dyn_args) {
    for (Value& v : iterate(eval(*node.dyn_args, frame))) out.args.push_back(std::move(v));
  }
  for (const auto& [k, v] : node.kwargs) out.kwargs.emplace_back(k, eval(*v, frame));
  if (node.dyn_kwargs) {
    Value d = eval(*node.dyn_kwargs, frame);
    if (!d.is_dict()) throw_type_error("argument after ** must be a mapping, not " + d.type_name());
    for (const auto& [k, v] : d.as_dict().entries) {
      if (!k.is_string()) throw_type_error("keywords must be strings");
      out.kwargs.emplace_back(k.as_string(), v);
    }
  }
  return out;
}

Value Interpreter::eval_filter(const FilterExpr& node, const FramePtr& frame, const Value* block_body) {
  Value operand = node.operand
                      ? (node.operand->kind == ExprKind::kFilter
                             ? with_line(node.operand->line,
                                         [&] {
                                           return eval_filter(static_cast<const FilterExpr&>(*node.operand),
                                                              frame, block_body);
                                         })
                             : eval(*node.operand, frame))
                      : *block_body;
  CallArgs args = eval_args(node.args, frame);
  if (node.fn == nullptr)
    throw TemplateError(ErrorKind::kRuntime, "No filter named " + str_repr(node.name) + " found.");
  return node.fn(*this, operand, args);
}

Value Interpreter::eval_compare(const CompareExpr& node, const FramePtr& frame) {
  Value left = eval(*node.first, frame);
  for (const auto& [op, rhs] : node.ops) {
    Value right = eval(*rhs, frame);
    bool ok;
    switch (op) {
      case CompareOp::kEq: ok = equals(left, right); break;
      case CompareOp::kNe: ok = !equals(left, right); break;
      case CompareOp::kLt: ok = compare(left, right, "<") < 0; break;
      case CompareOp::kLtEq: ok = compare(left, right, "<=") <= 0; break;
      case CompareOp::kGt: ok = compare(left, right, ">") > 0; break;
      case CompareOp::kGtEq: ok = compare(left, right, ">=") >= 0; break;
      case CompareOp::kIn: ok = contains(right, left); break;
      case CompareOp::kNotIn: ok = !contains(right, left); break;
    }
    // NaN: every ordering comparison is false in Python.
    if ((op == CompareOp::kLtEq || op == CompareOp::kGtEq) && left.is_number() && right.is_number() &&
        (std::isnan(left.as_double()) || std::isnan(right.as_double()))) {
      ok = false;
    }
    if (!ok) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

// `a + b + c + ...` (left-associative): operands are evaluated left to right as Python does; when all
// are plain strings the result is built with one allocation instead of one copy per `+` (chat
// templates concatenate whole message contents this way). Otherwise the additions are applied in
// order, so errors are those of Python (only which operand raises first may differ, and either way the
// render fails).
Value Interpreter::eval_add_chain(const BinaryExpr& node, const FramePtr& frame) {
  std::vector<const Expr*> operands;
  const Expr* e = &node;
  while (e->kind == ExprKind::kBinary && static_cast<const BinaryExpr*>(e)->op == BinaryOp::kAdd) {
    operands.push_back(static_cast<const BinaryExpr*>(e)->right.get());
    e = static_cast<const BinaryExpr*>(e)->left.get();
  }
  operands.push_back(e);
  std::vector<Value> values;
  values.reserve(operands.size());
  bool all_plain_strings = true;
  size_t total = 0;
  for (auto it = operands.rbegin(); it != operands.rend(); ++it) {
    values.push_back(eval(**it, frame));
    const Value& v = values.back();
    if (v.is_string() && !v.is_markup()) {
      total += v.as_string().size();
    } else {
      all_plain_strings = false;
    }
  }
  if (all_plain_strings) {
    if (total > kMaxBuiltSize) throw TemplateError(ErrorKind::kLimit, "string too large");
    std::string out;
    out.reserve(total);
    for (const Value& v : values) out += v.as_string();
    return Value::string(std::move(out));
  }
  Value acc = values[0];
  for (size_t i = 1; i < values.size(); ++i) acc = binary_op(BinaryOp::kAdd, acc, values[i]);
  return acc;
}

Value Interpreter::eval(const Expr& expr, const FramePtr& frame) {
  return with_line(expr.line, [&] { return eval_inner(expr, frame); });
}

Value Interpreter::eval_inner(const Expr& expr, const FramePtr& frame) {
  switch (expr.kind) {
    case ExprKind::kConst: return static_cast<const ConstExpr&>(expr).value;
    case ExprKind::kName: return lookup(*frame, static_cast<const NameExpr&>(expr).name);
    case ExprKind::kTuple: {
      std::vector<Value> items;
      for (const auto& e : static_cast<const TupleExpr&>(expr).items) items.push_back(eval(*e, frame));
      return Value::tuple(std::move(items));
    }
    case ExprKind::kList: {
      std::vector<Value> items;
      for (const auto& e : static_cast<const ListExpr&>(expr).items) items.push_back(eval(*e, frame));
      return Value::list(std::move(items));
    }
    case ExprKind::kDict: {
      auto d = std::make_shared<DictData>();
      for (const auto& [k, v] : static_cast<const DictExpr&>(expr).items) {
        Value key = eval(*k, frame);
        Value value = eval(*v, frame);
        d->insert_or_assign(std::move(key), std::move(value));
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::kGetattr: {
      const auto& node = static_cast<const GetattrExpr&>(expr);
      return get_attribute(eval(*node.obj, frame), node.attr);
    }
    case ExprKind::kGetitem: {
      const auto& node = static_cast<const GetitemExpr&>(expr);
      Value obj = eval(*node.obj, frame);
      if (node.arg->kind == ExprKind::kSlice) {
        const auto& s = static_cast<const SliceExpr&>(*node.arg);
        Value start = s.start ? eval(*s.start, frame) : Value::none();
        Value stop = s.stop ? eval(*s.stop, frame) : Value::none();
        Value step = s.step ? eval(*s.step, frame) : Value::none();
        return get_slice(obj, start, stop, step);
      }
      return get_item(obj, eval(*node.arg, frame));
    }
    case ExprKind::kSlice: throw_type_error("slices are only supported as a single subscript");
    case ExprKind::kCall: {
      const auto& node = static_cast<const CallExpr&>(expr);
      Value callee = eval(*node.callee, frame);
      CallArgs args = eval_args(node.args, frame);
      return call(callee, args);
    }
    case ExprKind::kFilter: return eval_filter(static_cast<const FilterExpr&>(expr), frame, nullptr);
    case ExprKind::kTest: {
      const auto& node = static_cast<const TestExpr&>(expr);
      Value operand = eval(*node.operand, frame);
      CallArgs args = eval_args(node.args, frame);
      if (node.fn == nullptr)
        throw TemplateError(ErrorKind::kRuntime, "No test named " + str_repr(node.name) + " found.");
      return Value::boolean(node.fn(*this, operand, args));
    }
    case ExprKind::kCondExpr: {
      const auto& node = static_cast<const CondExpr&>(expr);
      if (truthy(eval(*node.test, frame))) return eval(*node.then_expr, frame);
      if (node.else_expr) return eval(*node.else_expr, frame);
      return Value::undefined_hint("the inline if-expression on line " + std::to_string(node.line) +
                                   " evaluated to false and no else section was defined.");
    }
    case ExprKind::kBinary: {
      const auto& node = static_cast<const BinaryExpr&>(expr);
      if (node.op == BinaryOp::kAnd) {
        Value left = eval(*node.left, frame);
        return truthy(left) ? eval(*node.right, frame) : left;
      }
      if (node.op == BinaryOp::kOr) {
        Value left = eval(*node.left, frame);
        return truthy(left) ? left : eval(*node.right, frame);
      }
      if (node.op == BinaryOp::kAdd) return eval_add_chain(node, frame);
      Value left = eval(*node.left, frame);
      Value right = eval(*node.right, frame);
      return binary_op(node.op, left, right);
    }
    case ExprKind::kUnary: {
      const auto& node = static_cast<const UnaryExpr&>(expr);
      Value v = eval(*node.operand, frame);
      switch (node.op) {
        case UnaryOp::kNot: return Value::boolean(!truthy(v));
        case UnaryOp::kNeg: return negate(v);
        case UnaryOp::kPos: return unary_plus(v);
      }
      return v;
    }
    case ExprKind::kCompare: return eval_compare(static_cast<const CompareExpr&>(expr), frame);
    case ExprKind::kConcat: {
      std::string s;
      for (const auto& e : static_cast<const ConcatExpr&>(expr).items) s += to_str(eval(*e, frame));
      return Value::string(std::move(s));
    }
    case ExprKind::kNsRef: throw_type_error("namespace references can only be assigned to");
  }
  throw_type_error("unknown expression");
}

}  // namespace loom::text::jinja
