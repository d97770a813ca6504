// Global functions of transformers' chat-template environment: jinja2's range (sandboxed), dict and
// namespace (transformers' TemplateDict / TemplateNamespace), and transformers' raise_exception and
// strftime_now.
#include <chrono>
#include <ctime>

#include "text/jinja/builtins.h"
#include "text/jinja/error.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/objects.h"

namespace loom::text::jinja {

Value dict_fromkeys(Interpreter& interp, const Value& self, CallArgs& args);  // methods.cpp

namespace {

constexpr int64_t kMaxRange = 100000;  // jinja2.sandbox.MAX_RANGE

Value g_range(Interpreter&, const Value&, CallArgs& args) {
  if (!args.kwargs.empty()) throw_type_error("range() takes no keyword arguments");
  const auto& a = args.args;
  if (a.empty() || a.size() > 3)
    throw_type_error("range expected at most 3 arguments, got " + std::to_string(a.size()));
  int64_t start = 0, stop, step = 1;
  if (a.size() == 1) {
    stop = to_index(a[0], "range");
  } else {
    start = to_index(a[0], "range");
    stop = to_index(a[1], "range");
    if (a.size() == 3) step = to_index(a[2], "range");
  }
  if (step == 0) throw_type_error("range() arg 3 must not be zero");
  auto d = std::make_shared<ListData>();
  d->seq = SeqKind::kRange;
  d->range_start = start;
  d->range_stop = stop;
  d->range_step = step;
  int64_t n = 0;
  if (step > 0 && stop > start) n = (stop - start + step - 1) / step;
  if (step < 0 && stop < start) n = (start - stop - step - 1) / (-step);
  if (n > kMaxRange) {
    throw_error(ErrorKind::kType, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  }
  for (int64_t i = 0; i < n; ++i) d->items.push_back(Value::integer(start + i * step));
  return Value::sequence(std::move(d));
}

// dict(*args, **kwargs) as Python builds it: a mapping or an iterable of pairs, then keywords.
std::shared_ptr<DictData> build_dict(const CallArgs& args, const char* fn) {
  auto d = std::make_shared<DictData>();
  if (args.args.size() > 1)
    throw_type_error(std::string(fn) + " expected at most 1 argument, got " +
                     std::to_string(args.args.size()));
  if (args.args.size() == 1) {
    const Value& src = args.args[0];
    if (src.is_dict()) {
      for (const auto& [k, v] : src.as_dict().entries) d->insert_or_assign(k, v);
    } else {
      size_t i = 0;
      for (const Value& pair : iterate(src)) {
        if (!is_iterable(pair)) {
          throw_type_error("cannot convert dictionary update sequence element #" + std::to_string(i) +
                           " to a sequence");
        }
        std::vector<Value> kv = iterate(pair);
        if (kv.size() != 2) {
          throw_type_error("dictionary update sequence element #" + std::to_string(i) + " has length " +
                           std::to_string(kv.size()) + "; 2 is required");
        }
        d->insert_or_assign(kv[0], kv[1]);
        ++i;
      }
    }
  }
  for (const auto& [k, v] : args.kwargs) d->insert_or_assign(Value::string(k), v);
  return d;
}

Value g_namespace(Interpreter&, const Value&, CallArgs& args) {
  auto ns = std::make_shared<NamespaceObject>();
  std::shared_ptr<DictData> attrs = build_dict(args, "namespace");
  for (const auto& [k, v] : attrs->entries) {
    if (!k.is_string()) throw_type_error("namespace attribute names must be strings");
    ns->set(k.as_string(), v);
  }
  return Value::object(std::move(ns));
}

Value g_raise_exception(Interpreter&, const Value&, CallArgs& args) {
  ArgBinder a("raise_exception", args, {"message"});
  throw TemplateError(ErrorKind::kRuntime, to_str(a.required(0)));
}

Value g_strftime_now(Interpreter& interp, const Value&, CallArgs& args) {
  ArgBinder a("strftime_now", args, {"format"});
  std::string fmt = str_arg(a.required(0), "strftime() argument 1");
  std::tm tm{};
  long micros = 0;
  if (interp.options().now_epoch_seconds) {
    std::time_t t = static_cast<std::time_t>(*interp.options().now_epoch_seconds);
    gmtime_r(&t, &tm);
  } else {
    auto now = std::chrono::system_clock::now();
    std::time_t t = std::chrono::system_clock::to_time_t(now);
    localtime_r(&t, &tm);
    micros = static_cast<long>(
        std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000);
  }
  // datetime.strftime handles %f, %z and %Z itself (naive datetime: empty zone fields); the rest goes to
  // the C library's strftime in the C locale, as CPython does.
  std::string c_fmt;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] == '%' && i + 1 < fmt.size()) {
      char d = fmt[i + 1];
      if (d == 'f') {
        char buf[8];
        std::snprintf(buf, sizeof buf, "%06ld", micros);
        c_fmt += buf;
        ++i;
        continue;
      }
      if (d == 'z' || d == 'Z') {
        ++i;
        continue;
      }
      c_fmt += fmt.substr(i, 2);
      ++i;
      continue;
    }
    if (fmt[i] == '%') {
      c_fmt += "%%";  // a lone trailing % prints as itself
      continue;
    }
    c_fmt.push_back(fmt[i]);
  }
  if (c_fmt.empty()) return Value::string("");
  std::string out(256, '\0');
  while (true) {
    size_t n = std::strftime(out.data(), out.size(), c_fmt.c_str(), &tm);
    if (n > 0 || out.size() > 65536) {
      out.resize(n);
      break;
    }
    out.resize(out.size() * 4);
  }
  return Value::string(out);
}

Value g_dict(Interpreter&, const Value&, CallArgs& args) {
  return Value::dict(build_dict(args, "dict"));
}

// transformers' TemplateDict: callable like dict(), plus dict.fromkeys.
class DictGlobal final : public Object {
 public:
  std::string type_name() const override { return "TemplateDict"; }
  bool callable() const override { return true; }
  Value call(Interpreter& interp, CallArgs& args) override { return g_dict(interp, Value(), args); }
  bool get_attr(const Value& self, std::string_view name, Value* out) const override {
    if (name != "fromkeys") return false;
    *out = make_builtin("fromkeys", dict_fromkeys, self);
    return true;
  }
};

// jinja2.utils.Joiner: returns "" on the first call and the separator afterwards.
class JoinerObject final : public Object {
 public:
  explicit JoinerObject(std::string sep) : sep_(std::move(sep)) {}
  std::string type_name() const override { return "Joiner"; }
  bool callable() const override { return true; }
  Value call(Interpreter&, CallArgs& args) override {
    ArgBinder a("joiner", args, {});
    if (!used_) {
      used_ = true;
      return Value::string("");
    }
    return Value::string(sep_);
  }

 private:
  std::string sep_;
  bool used_ = false;
};

// jinja2.utils.Cycler: .next() returns the current item and advances, .reset(), .current.
class CyclerObject final : public Object {
 public:
  explicit CyclerObject(std::vector<Value> items) : items_(std::move(items)) {}
  std::string type_name() const override { return "Cycler"; }
  bool get_attr(const Value& self, std::string_view name, Value* out) const override {
    if (name == "current") {
      *out = items_[pos_];
    } else if (name == "next") {
      *out = make_builtin("next", &CyclerObject::next, self);
    } else if (name == "reset") {
      *out = make_builtin("reset", &CyclerObject::reset, self);
    } else {
      return false;
    }
    return true;
  }

 private:
  static Value next(Interpreter&, const Value& self, CallArgs& args) {
    ArgBinder a("next", args, {});
    auto* c = self.object_as<CyclerObject>();
    Value v = c->items_[c->pos_];
    c->pos_ = (c->pos_ + 1) % c->items_.size();
    return v;
  }
  static Value reset(Interpreter&, const Value& self, CallArgs& args) {
    ArgBinder a("reset", args, {});
    self.object_as<CyclerObject>()->pos_ = 0;
    return Value::none();
  }

  std::vector<Value> items_;
  size_t pos_ = 0;
};

Value g_joiner(Interpreter&, const Value&, CallArgs& args) {
  ArgBinder a("joiner", args, {"sep"});
  return Value::object(std::make_shared<JoinerObject>(a.has(0) ? to_str(a.get(0)) : std::string(", ")));
}

Value g_cycler(Interpreter&, const Value&, CallArgs& args) {
  if (!args.kwargs.empty()) throw_type_error("cycler() takes no keyword arguments");
  if (args.args.empty()) throw TemplateError(ErrorKind::kRuntime, "at least one item has to be provided");
  return Value::object(std::make_shared<CyclerObject>(args.args));
}

}  // namespace

bool find_global(std::string_view name, Value* out) {
  if (name == "range") {
    *out = make_builtin("range", g_range, Value());
  } else if (name == "namespace") {
    *out = Value::object(
        std::make_shared<BuiltinFunction>("namespace", g_namespace, Value(),
                                          "<class "
                                          "'transformers.utils.chat_template_utils._cached_compile_jinja_"
                                          "template.<locals>.TemplateNamespace'>"));
  } else if (name == "dict") {
    *out = Value::object(std::make_shared<DictGlobal>());
  } else if (name == "raise_exception") {
    *out = make_builtin("raise_exception", g_raise_exception, Value());
  } else if (name == "strftime_now") {
    *out = make_builtin("strftime_now", g_strftime_now, Value());
  } else if (name == "joiner") {
    *out = Value::object(
        std::make_shared<BuiltinFunction>("joiner", g_joiner, Value(), "<class 'jinja2.utils.Joiner'>"));
  } else if (name == "cycler") {
    *out = Value::object(
        std::make_shared<BuiltinFunction>("cycler", g_cycler, Value(), "<class 'jinja2.utils.Cycler'>"));
  } else {
    return false;
  }
  return true;
}

}  // namespace loom::text::jinja
