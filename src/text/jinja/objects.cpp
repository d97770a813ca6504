#include "text/jinja/objects.h"

#include "text/jinja/builtins.h"
#include "text/jinja/error.h"

namespace loom::text::jinja {

std::string NamespaceObject::repr() const {
  return "<Namespace " + dict_repr(*attrs_) + ">";
}

bool NamespaceObject::get_attr(const Value&, std::string_view name, Value* out) const {
  const Value* v = attrs_->find(Value::string(std::string(name)));
  if (v == nullptr) return false;
  *out = *v;
  return true;
}

void NamespaceObject::set(const std::string& name, Value value) {
  if (!name.empty() && name[0] == '_') {
    throw TemplateError(
        ErrorKind::kSecurity,
        "Chat templates cannot store underscore-prefixed attributes on a namespace, but got " +
            str_repr(name) + ". Please rename the attribute.");
  }
  attrs_->insert_or_assign(Value::string(name), std::move(value));
}

bool MacroObject::get_attr(const Value&, std::string_view name, Value* out) const {
  if (name == "name") {
    *out = Value::string(def_->name);
  } else if (name == "arguments") {
    std::vector<Value> args;
    for (const auto& p : def_->params) args.push_back(Value::string(p));
    *out = Value::tuple(std::move(args));
  } else if (name == "catch_kwargs") {
    *out = Value::boolean(def_->catch_kwargs);
  } else if (name == "catch_varargs") {
    *out = Value::boolean(def_->catch_varargs);
  } else if (name == "caller") {
    *out = Value::boolean(def_->accesses_caller);
  } else {
    return false;
  }
  return true;
}

bool LoopObject::fetch(size_t i) const {
  while (items_.size() <= i && source_pos_ < source_.size()) {
    const Value& candidate = source_[source_pos_++];
    if (!filter_ || filter_(candidate)) items_.push_back(candidate);
  }
  return i < items_.size();
}

size_t LoopObject::length() const {
  while (fetch(items_.size())) {
  }
  return items_.size();
}

std::string LoopObject::repr() const {
  return "<LoopContext " + std::to_string(index0_ + 1) + "/" + std::to_string(length()) + ">";
}

namespace {

Value loop_cycle(Interpreter&, const Value& self, CallArgs& args) {
  if (!args.kwargs.empty()) throw_type_error("cycle() got an unexpected keyword argument");
  if (args.args.empty()) throw_type_error("no items for cycling given");
  auto* loop = self.object_as<LoopObject>();
  return args.args[loop->index0() % args.args.size()];
}

Value loop_changed(Interpreter&, const Value& self, CallArgs& args) {
  if (!args.kwargs.empty()) throw_type_error("changed() got an unexpected keyword argument");
  return Value::boolean(self.object_as<LoopObject>()->changed(Value::tuple(args.args)));
}

}  // namespace

bool LoopObject::changed(const Value& values) {
  if (last_changed_.has_value() && equals(*last_changed_, values)) return false;
  last_changed_ = values;
  return true;
}

bool LoopObject::get_attr(const Value& self, std::string_view name, Value* out) const {
  const int64_t i = static_cast<int64_t>(index0_);
  auto n_all = [this] { return static_cast<int64_t>(length()); };
  if (name == "index0") {
    *out = Value::integer(i);
  } else if (name == "index") {
    *out = Value::integer(i + 1);
  } else if (name == "revindex0") {
    *out = Value::integer(n_all() - i - 1);
  } else if (name == "revindex") {
    *out = Value::integer(n_all() - i);
  } else if (name == "first") {
    *out = Value::boolean(i == 0);
  } else if (name == "last") {
    *out = Value::boolean(!fetch(index0_ + 1));
  } else if (name == "length") {
    *out = Value::integer(n_all());
  } else if (name == "depth0") {
    *out = Value::integer(depth0_);
  } else if (name == "depth") {
    *out = Value::integer(depth0_ + 1);
  } else if (name == "previtem") {
    *out = i == 0 ? Value::undefined_hint("there is no previous item") : items_[index0_ - 1];
  } else if (name == "nextitem") {
    *out = fetch(index0_ + 1) ? items_[index0_ + 1] : Value::undefined_hint("there is no next item");
  } else if (name == "cycle" || name == "changed") {
    *out = make_builtin(std::string(name), name == "cycle" ? loop_cycle : loop_changed, self);
  } else {
    return false;
  }
  return true;
}

Value LoopObject::call(Interpreter& interp, CallArgs& args) {
  if (node_ == nullptr || !node_->recursive) {
    throw_type_error("The loop must have the 'recursive' marker to be called recursively.");
  }
  if (args.args.size() != 1 || !args.kwargs.empty()) throw_type_error("loop() takes exactly one argument");
  return interp.recurse_loop(*node_, frame_, args.args[0], depth0_ + 1);
}

std::string BuiltinFunction::repr() const {
  if (!class_repr_.empty()) return class_repr_;
  if (self_.is_undefined() && self_.undefined_data() == nullptr) return "<built-in function " + name_ + ">";
  return "<built-in method " + name_ + " of " + self_.type_name() + " object>";
}

}  // namespace loom::text::jinja
