// Interpreter objects: namespace(), macros, the `loop` variable and built-in callables.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "text/jinja/interpreter.h"
#include "text/jinja/value.h"

namespace loom::text::jinja {

// jinja2.utils.Namespace (transformers' TemplateNamespace rejects underscore-prefixed names).
class NamespaceObject final : public Object {
 public:
  NamespaceObject() : attrs_(std::make_shared<DictData>()) {}
  std::string type_name() const override { return "Namespace"; }
  std::string repr() const override;
  bool get_attr(const Value& self, std::string_view name, Value* out) const override;
  // {% set ns.name = value %}; SecurityError for names starting with "_".
  void set(const std::string& name, Value value);

 private:
  std::shared_ptr<DictData> attrs_;
};

// jinja2.runtime.Macro: a macro (or the `caller` of a call block) bound to its defining frame.
class MacroObject final : public Object {
 public:
  MacroObject(const MacroDef* def, FramePtr closure) : def_(def), closure_(std::move(closure)) {}
  std::string type_name() const override { return "Macro"; }
  std::string repr() const override { return "<Macro " + str_repr(def_->name) + ">"; }
  bool get_attr(const Value& self, std::string_view name, Value* out) const override;
  bool callable() const override { return true; }
  Value call(Interpreter& interp, CallArgs& args) override {
    return interp.invoke_macro(*def_, closure_, args);
  }

 private:
  const MacroDef* def_;
  FramePtr closure_;
};

// jinja2.runtime.LoopContext. The loop filter (`for x in y if cond`) runs lazily, item by item, as
// jinja2's generator does: loop.last / loop.nextitem peek one item ahead, loop.length filters all.
class LoopObject final : public Object {
 public:
  using Filter = std::function<bool(const Value&)>;  // empty = no loop filter

  LoopObject(std::vector<Value> source, Filter filter, int depth0, const ForStmt* node, FramePtr frame)
      : source_(std::move(source)),
        filter_(std::move(filter)),
        depth0_(depth0),
        node_(node),
        frame_(std::move(frame)) {}
  std::string type_name() const override { return "LoopContext"; }
  std::string repr() const override;
  bool get_attr(const Value& self, std::string_view name, Value* out) const override;
  bool callable() const override { return true; }
  Value call(Interpreter& interp, CallArgs& args) override;

  // Makes filtered item i available; false when the sequence ends before it.
  bool fetch(size_t i) const;
  const Value& item(size_t i) const { return items_[i]; }
  void set_index(size_t index0) { index0_ = index0; }
  size_t index0() const { return index0_; }
  // loop.changed(*values)
  bool changed(const Value& values);

 private:
  size_t length() const;

  std::vector<Value> source_;
  Filter filter_;
  mutable size_t source_pos_ = 0;
  mutable std::vector<Value> items_;  // items that passed the filter so far
  size_t index0_ = 0;
  int depth0_;
  const ForStmt* node_;
  FramePtr frame_;  // the frame the loop statement runs in (for recursive calls)
  std::optional<Value> last_changed_;
};

using BuiltinFn = Value (*)(Interpreter& interp, const Value& self, CallArgs& args);

// A built-in function or a method bound to `self`.
class BuiltinFunction final : public Object {
 public:
  // class_repr: set for globals that are classes in Python (namespace, cycler, joiner), whose repr has no
  // memory address and is therefore reproducible.
  BuiltinFunction(std::string name, BuiltinFn fn, Value self, std::string class_repr = {})
      : name_(std::move(name)), fn_(fn), self_(std::move(self)), class_repr_(std::move(class_repr)) {}
  std::string type_name() const override { return "builtin_function_or_method"; }
  std::string repr() const override;
  bool callable() const override { return true; }
  Value call(Interpreter& interp, CallArgs& args) override { return fn_(interp, self_, args); }

 private:
  std::string name_;
  BuiltinFn fn_;
  Value self_;
  std::string class_repr_;
};

}  // namespace loom::text::jinja
