// jinja2's built-in filters on sequences and mappings (jinja2/filters.py), and the filter registry;
// string and number filters are in filters_text.cpp.
//
// Filters that return generators in jinja2 (map, select, reject, selectattr, rejectattr, unique, items,
// batch, slice, reverse on sequences) return one-shot iterators here too, so `|list`, `|length`,
// truthiness and printing behave as in Python. They are computed eagerly, so an error inside such a
// generator surfaces even when the template never consumes it (see README.md).
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "text/jinja/builtins.h"
#include "text/jinja/error.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/json_dump.h"
#include "text/jinja/objects.h"
#include "text/jinja/ops.h"
#include "text/jinja/pyformat.h"
#include "text/jinja/unicode.h"

namespace loom::text::jinja {

FilterFn find_text_filter(std::string_view name);  // filters_text.cpp

namespace {

Value ignore_case(const Value& v) {
  return v.is_string() ? Value::string(unicode::lower(v.as_string())) : v;
}

// jinja2 _prepare_attribute_parts: "a.0.b" -> ["a", 0, "b"].
std::vector<Value> attribute_parts(const Value& attr) {
  std::vector<Value> parts;
  if (attr.is_none()) return parts;
  if (!attr.is_string()) {
    parts.push_back(attr);
    return parts;
  }
  const std::string& s = attr.as_string();
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string part = s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && part.size() < 19 &&
                  std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    parts.push_back(digits ? Value::integer(std::stoll(part)) : Value::string(part));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

// jinja2 make_attrgetter (environment.getitem per part; `default` replaces Undefined results).
Value get_path(Value item, const std::vector<Value>& parts, const Value* default_value = nullptr) {
  for (const Value& p : parts) {
    item = get_item(item, p);
    if (default_value != nullptr && !default_value->is_none() && item.is_undefined()) item = *default_value;
  }
  return item;
}

// jinja2 make_multi_attrgetter: "a,b.c" -> [item.a, item.b.c] (a list compared element-wise).
Value get_multi(const Value& item, const Value& attribute, bool case_insensitive) {
  std::vector<Value> attrs;
  if (attribute.is_string()) {
    const std::string& s = attribute.as_string();
    size_t start = 0;
    while (true) {
      size_t comma = s.find(',', start);
      attrs.push_back(
          Value::string(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  } else {
    attrs.push_back(attribute);
  }
  std::vector<Value> out;
  for (const Value& a : attrs) {
    Value v = get_path(item, attribute_parts(a));
    out.push_back(case_insensitive ? ignore_case(v) : v);
  }
  return Value::list(std::move(out));
}

Value f_sum(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("sum", args, {"attribute", "start"});
  Value total = a.get_or(1, Value::integer(0));
  std::vector<Value> parts =
      (a.has(0) && !a.get(0).is_none()) ? attribute_parts(a.get(0)) : std::vector<Value>{};
  for (const Value& item : iterate(v)) {
    Value x = parts.empty() ? item : get_path(item, parts);
    if (total.is_string()) throw_type_error("sum() can't sum strings [use ''.join(seq) instead]");
    total = binary_op(BinaryOp::kAdd, total, x);
  }
  return total;
}

// ---- sequences ----

Value f_length(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("length", args, {});
  return Value::integer(length(v));
}

Value f_list(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("list", args, {});
  return Value::list(iterate(v));
}

Value f_first(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("first", args, {});
  if (v.is_iterator()) {
    IteratorData& it = v.as_iterator();
    if (it.pos < it.items.size()) return it.items[it.pos++];
    return Value::undefined_hint("No first item, sequence was empty.");
  }
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined_hint("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("last", args, {});
  if (v.is_iterator() || v.is_object() || v.is_none() || v.is_number()) {
    throw_type_error("'" + v.type_name() + "' object is not reversible");
  }
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined_hint("No last item, sequence was empty.");
  return items.back();
}

Value f_reverse(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("reverse", args, {});
  if (v.is_string()) {
    std::u32string u = unicode::to_u32(v.as_string());
    std::reverse(u.begin(), u.end());
    return Value::string(unicode::to_utf8(u));
  }
  if (v.is_list() || v.is_dict()) {
    // reversed(): an iterator over the sequence (dicts iterate their keys).
    std::vector<Value> items = iterate(v);
    std::reverse(items.begin(), items.end());
    const char* type = v.is_dict()                       ? "dict_reversekeyiterator"
                       : v.seq_kind() == SeqKind::kTuple ? "reversed"
                       : v.seq_kind() == SeqKind::kRange ? "range_iterator"
                                                         : "list_reverseiterator";
    return Value::iterator(type, std::move(items));
  }
  if (!is_iterable(v)) throw_type_error("argument must be iterable");
  std::vector<Value> items = iterate(v);  // generators: list(value) reversed
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value f_join(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("join", args, {"d", "attribute"});
  std::string sep = a.has(0) ? to_str(a.get(0)) : std::string();
  std::vector<Value> parts =
      (a.has(1) && !a.get(1).is_none()) ? attribute_parts(a.get(1)) : std::vector<Value>{};
  bool attr = a.has(1) && !a.get(1).is_none();
  std::string out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += to_str(attr ? get_path(item, parts) : item);
  }
  return Value::string(std::move(out));
}

Value f_default(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("default", args, {"default_value", "boolean"});
  bool boolean = a.has(1) && truthy(a.get(1));
  if (v.is_undefined() || (boolean && !truthy(v))) return a.get_or(0, Value::string(""));
  return v;
}

Value f_items(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("items", args, {});
  if (v.is_undefined()) return Value::iterator("generator", {});
  if (!v.is_dict()) throw_type_error("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, val] : v.as_dict().entries) out.push_back(Value::tuple({k, val}));
  return Value::iterator("generator", std::move(out));
}

Value f_dictsort(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("dictsort", args, {"case_sensitive", "by", "reverse"});
  bool case_sensitive = a.has(0) && truthy(a.get(0));
  std::string by = a.has(1) ? str_arg(a.get(1), "by") : "key";
  bool reverse = a.has(2) && truthy(a.get(2));
  if (by != "key" && by != "value") throw_type_error("You can only sort by either \"key\" or \"value\"");
  if (!v.is_dict()) throw_type_error("'" + v.type_name() + "' object has no attribute 'items'");
  std::vector<std::pair<Value, Value>> entries = v.as_dict().entries;
  size_t pos = by == "key" ? 0 : 1;
  auto key = [&](const std::pair<Value, Value>& e) {
    const Value& x = pos == 0 ? e.first : e.second;
    return case_sensitive ? x : ignore_case(x);
  };
  std::stable_sort(entries.begin(), entries.end(), [&](const auto& l, const auto& r) {
    return reverse ? compare(key(r), key(l), "<") < 0 : compare(key(l), key(r), "<") < 0;
  });
  std::vector<Value> out;
  for (auto& [k, val] : entries) out.push_back(Value::tuple({k, val}));
  return Value::list(std::move(out));
}

Value f_sort(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("sort", args, {"reverse", "case_sensitive", "attribute"});
  bool reverse = a.has(0) && truthy(a.get(0));
  bool case_sensitive = a.has(1) && truthy(a.get(1));
  Value attribute = a.get_or(2, Value::none());
  std::vector<Value> items = iterate(v);
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& item : items) keyed.emplace_back(get_multi(item, attribute, !case_sensitive), std::move(item));
  // Python's sorted(reverse=True) keeps equal elements in their original order.
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& l, const auto& r) {
    return reverse ? compare(r.first, l.first, "<") < 0 : compare(l.first, r.first, "<") < 0;
  });
  std::vector<Value> out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return Value::list(std::move(out));
}

Value f_unique(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("unique", args, {"case_sensitive", "attribute"});
  bool case_sensitive = a.has(0) && truthy(a.get(0));
  std::vector<Value> parts =
      (a.has(1) && !a.get(1).is_none()) ? attribute_parts(a.get(1)) : std::vector<Value>{};
  std::vector<std::string> seen;
  std::vector<Value> out;
  for (const Value& item : iterate(v)) {
    Value key = get_path(item, parts);
    if (!case_sensitive) key = ignore_case(key);
    std::string h = hash_key(key);
    if (std::find(seen.begin(), seen.end(), h) != seen.end()) continue;
    seen.push_back(std::move(h));
    out.push_back(item);
  }
  return Value::iterator("generator", std::move(out));
}

Value min_max(const Value& v, CallArgs& args, const char* name, bool want_max) {
  ArgBinder a(name, args, {"case_sensitive", "attribute"});
  bool case_sensitive = a.has(0) && truthy(a.get(0));
  std::vector<Value> parts =
      (a.has(1) && !a.get(1).is_none()) ? attribute_parts(a.get(1)) : std::vector<Value>{};
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined_hint("No aggregated item, sequence was empty.");
  auto key = [&](const Value& item) {
    Value k = get_path(item, parts);
    return case_sensitive ? k : ignore_case(k);
  };
  size_t best = 0;
  Value best_key = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    int c = compare(k, best_key, want_max ? ">" : "<");
    if (want_max ? c > 0 : c < 0) {
      best = i;
      best_key = k;
    }
  }
  return items[best];
}

Value f_min(Interpreter&, const Value& v, CallArgs& args) {
  return min_max(v, args, "min", false);
}
Value f_max(Interpreter&, const Value& v, CallArgs& args) {
  return min_max(v, args, "max", true);
}

Value f_batch(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("batch", args, {"linecount", "fill_with"});
  // jinja2 only compares len(tmp) == linecount (any value works) and, with fill_with, pads to it.
  const Value& linecount = a.required(0);
  Value fill = a.get_or(1, Value::none());
  std::vector<Value> out, tmp;
  for (const Value& item : iterate(v)) {
    if (equals(Value::integer(static_cast<int64_t>(tmp.size())), linecount)) {
      out.push_back(Value::list(std::move(tmp)));
      tmp.clear();
    }
    tmp.push_back(item);
  }
  if (!tmp.empty()) {
    if (!fill.is_none() && compare(Value::integer(static_cast<int64_t>(tmp.size())), linecount, "<") < 0) {
      int64_t n = to_index(linecount, "linecount");
      while (static_cast<int64_t>(tmp.size()) < n) tmp.push_back(fill);
    }
    out.push_back(Value::list(std::move(tmp)));
  }
  return Value::iterator("generator", std::move(out));
}

Value f_slice(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("slice", args, {"slices", "fill_with"});
  int64_t slices = to_index(a.required(0), "slices");
  Value fill = a.get_or(1, Value::none());
  std::vector<Value> seq = iterate(v);
  int64_t len = static_cast<int64_t>(seq.size());
  if (slices <= 0) throw_type_error("integer division or modulo by zero");
  int64_t per = len / slices, extra = len % slices, offset = 0;
  std::vector<Value> out;
  for (int64_t k = 0; k < slices; ++k) {
    int64_t start = offset + k * per;
    if (k < extra) ++offset;
    int64_t end = offset + (k + 1) * per;
    std::vector<Value> tmp(seq.begin() + start, seq.begin() + end);
    if (!fill.is_none() && k >= extra) tmp.push_back(fill);
    out.push_back(Value::list(std::move(tmp)));
  }
  return Value::iterator("generator", std::move(out));
}

Value f_attr(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("attr", args, {"name"});
  std::string name = str_arg(a.required(0), "attribute name");
  // Only real attributes (methods, object attributes), not item fallback.
  if (v.is_undefined()) v.fail_undefined();
  Value out;
  if (v.is_object()) {
    if (v.as_object().get_attr(v, name, &out)) return get_attribute(v, name);
  } else if (find_method(v, name, &out)) {
    return get_attribute(v, name);
  }
  return Value::undefined_attr(v, name);
}

// select / reject / selectattr / rejectattr
Value select_or_reject(Interpreter& interp, const Value& v, CallArgs& args, bool select, bool lookup_attr) {
  if (!truthy(v)) return Value::iterator("generator", {});
  size_t off = 0;
  std::vector<Value> parts;
  bool has_attr = false;
  if (lookup_attr) {
    if (args.args.empty()) throw_type_error("Missing parameter for attribute name");
    parts = attribute_parts(args.args[0]);
    has_attr = true;
    off = 1;
  }
  bool has_test = args.args.size() > off;
  std::string test_name;
  CallArgs test_args;
  if (has_test) {
    test_name = str_arg(args.args[off], "test name");
    test_args.args.assign(args.args.begin() + static_cast<std::ptrdiff_t>(off + 1), args.args.end());
    test_args.kwargs = args.kwargs;
  }
  std::vector<Value> out;
  for (const Value& item : iterate(v)) {
    Value x = has_attr ? get_path(item, parts) : item;
    bool ok;
    if (has_test) {
      CallArgs copy = test_args;
      ok = interp.apply_test(test_name, x, copy);
    } else {
      ok = truthy(x);
    }
    if (ok == select) out.push_back(item);
  }
  return Value::iterator("generator", std::move(out));
}

Value f_select(Interpreter& i, const Value& v, CallArgs& a) {
  return select_or_reject(i, v, a, true, false);
}
Value f_reject(Interpreter& i, const Value& v, CallArgs& a) {
  return select_or_reject(i, v, a, false, false);
}
Value f_selectattr(Interpreter& i, const Value& v, CallArgs& a) {
  return select_or_reject(i, v, a, true, true);
}
Value f_rejectattr(Interpreter& i, const Value& v, CallArgs& a) {
  return select_or_reject(i, v, a, false, true);
}

Value f_map(Interpreter& interp, const Value& v, CallArgs& args) {
  if (!truthy(v)) return Value::iterator("generator", {});
  std::vector<Value> out;
  bool by_attribute =
      args.args.empty() && std::any_of(args.kwargs.begin(), args.kwargs.end(),
                                       [](const auto& kv) { return kv.first == "attribute"; });
  if (by_attribute) {
    Value attribute, fallback = Value::none();
    for (const auto& [k, val] : args.kwargs) {
      if (k == "attribute") {
        attribute = val;
      } else if (k == "default") {
        fallback = val;
      } else {
        throw_type_error("Unexpected keyword argument " + str_repr(k));
      }
    }
    std::vector<Value> parts = attribute_parts(attribute);
    for (const Value& item : iterate(v)) out.push_back(get_path(item, parts, &fallback));
    return Value::iterator("generator", std::move(out));
  }
  if (args.args.empty()) throw_type_error("map requires a filter argument");
  std::string name = str_arg(args.args[0], "filter name");
  CallArgs rest;
  rest.args.assign(args.args.begin() + 1, args.args.end());
  rest.kwargs = args.kwargs;
  for (const Value& item : iterate(v)) {
    CallArgs copy = rest;
    out.push_back(interp.apply_filter(name, item, copy));
  }
  return Value::iterator("generator", std::move(out));
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

constexpr FilterEntry kSequenceFilters[] = {
    {"attr", f_attr},
    {"batch", f_batch},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"first", f_first},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"reverse", f_reverse},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"slice", f_slice},
    {"sort", f_sort},
    {"sum", f_sum},
    {"unique", f_unique},
};

}  // namespace

FilterFn find_filter(std::string_view name) {
  for (const auto& f : kSequenceFilters) {
    if (f.name == name) return f.fn;
  }
  return find_text_filter(name);
}

}  // namespace loom::text::jinja
