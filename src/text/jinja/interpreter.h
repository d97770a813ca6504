// Tree-walking evaluator for a parsed template: renders statements into a string with jinja2's
// runtime semantics (frames per FrameInfo, Python operators, sandboxed attribute access, macros,
// loops with the `loop` object, namespaces).
//
// One Interpreter renders one template once; it is cheap to build. Errors are thrown as TemplateError
// (error.h) and annotated with the line of the statement or expression that raised them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/value.h"

namespace loom::text::jinja {

struct RenderOptions {
  // strftime_now() clock: seconds since the Unix epoch, formatted as UTC. Unset = the current local
  // time, as transformers' datetime.now().
  std::optional<int64_t> now_epoch_seconds;
  int max_call_depth = 256;  // macro / recursive-loop nesting
  size_t max_output_bytes = size_t{64} << 20;
};

// Variables visible to the template (render kwargs); they shadow globals of the same name.
using RenderVars = std::unordered_map<std::string, Value>;

// A runtime scope: one slot per FrameInfo declaration; nullopt = "missing" (reads give Undefined).
struct Frame {
  const FrameInfo* info = nullptr;
  std::shared_ptr<Frame> parent;
  std::vector<std::optional<Value>> slots;
};
using FramePtr = std::shared_ptr<Frame>;

class Interpreter {
 public:
  Interpreter(const TemplateNode& root, const RenderVars& vars, const RenderOptions& options);

  std::string render();

  // Used by built-ins.
  const RenderOptions& options() const { return options_; }
  Value call(const Value& callee, CallArgs& args);
  Value apply_filter(const std::string& name, const Value& operand, CallArgs& args);
  bool apply_test(const std::string& name, const Value& operand, CallArgs& args);

  // Macro / caller invocation (runtime.Macro.__call__).
  Value invoke_macro(const MacroDef& def, const FramePtr& closure, CallArgs& args);
  // Recursive loop call: loop(children).
  Value recurse_loop(const ForStmt& node, const FramePtr& frame, const Value& iterable, int depth0);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  FramePtr enter_frame(const FrameInfo& info, FramePtr parent);
  // A block's frame: no parent; names resolve through root-level assignments (jinja2's context.vars)
  // or, for scoped blocks, through the enclosing frames, then the render context.
  FramePtr enter_block_frame(const BlockStmt& node, const FramePtr& enclosing);
  Value lookup(const Frame& frame, const std::string& name) const;
  bool resolve(const std::string& name, Value* out) const;
  void bind(Frame& frame, const std::string& name, Value value) const;
  void assign(const Expr& target, const Value& value, Frame& frame);

  Flow exec_list(const StmtList& list, const FramePtr& frame, std::string& out);
  Flow exec(const Stmt& stmt, const FramePtr& frame, std::string& out);
  void exec_for(const ForStmt& node, const FramePtr& frame, const Value& iterable, int depth0,
                std::string& out);
  void exec_call_block(const CallBlockStmt& node, const FramePtr& frame, std::string& out);

  Value eval(const Expr& expr, const FramePtr& frame);
  Value eval_inner(const Expr& expr, const FramePtr& frame);
  Value eval_filter(const FilterExpr& node, const FramePtr& frame, const Value* block_body);
  CallArgs eval_args(const CallArgsNode& node, const FramePtr& frame);
  Value eval_compare(const CompareExpr& node, const FramePtr& frame);
  Value eval_add_chain(const BinaryExpr& node, const FramePtr& frame);

  void append_output(std::string& out, std::string_view text) const;

  const TemplateNode& root_;
  FramePtr root_frame_;
  const RenderVars& vars_;
  RenderOptions options_;
  int depth_ = 0;
};

}  // namespace loom::text::jinja
