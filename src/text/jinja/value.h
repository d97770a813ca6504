// The value model of the template interpreter: the Python objects a jinja2 template sees (None, bool,
// int, float, str, list, tuple, dict, Undefined, generators, namespaces, macros, ...) with Python's
// semantics for printing, truthiness, equality and ordering.
//
// A Value is small (kind + number + one shared pointer); copies share their heap part. Lists, tuples and
// dicts are immutable once built (the template runs in jinja2's ImmutableSandboxedEnvironment, where no
// mutating method is reachable), so sharing is safe. Iterators (generators returned by filters such as
// select or map) and namespaces are the mutable exceptions: Python iterators are one-shot and
// namespaces are assigned with {% set ns.x = ... %}.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace loom::text::jinja {

class Interpreter;
class Value;

// Nesting bound for recursive operations on values (repr, ==, ordering, json.dumps, JSON input):
// Python raises RecursionError around this depth; here it protects the C++ stack.
constexpr size_t kMaxNesting = 1000;

enum class ValueKind : uint8_t {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,  // list, tuple, dict views and range (see SeqKind)
  kDict,
  kIterator,
  kObject,  // namespace, loop, macro, functions and bound methods
};

struct HeapData {
  virtual ~HeapData() = default;
};

struct StringData final : HeapData {
  explicit StringData(std::string v) : s(std::move(v)) {}
  std::string s;
};

// Which Python sequence type a kList value stands for. Only repr(), equality between kinds and a few
// tests differ; all of them index and iterate the same way.
enum class SeqKind : uint8_t { kList, kTuple, kDictKeys, kDictValues, kDictItems, kRange };

struct ListData final : HeapData {
  std::vector<Value> items;
  SeqKind seq = SeqKind::kList;
  int64_t range_start = 0, range_stop = 0, range_step = 1;  // kRange only, for repr()
};

// A Python dict: insertion-ordered, keys compared by Python equality (1 == 1.0 == True).
struct DictData final : HeapData {
  std::vector<std::pair<Value, Value>> entries;
  // hash_key(key) -> position in entries; built once the dict grows past kLinearMax entries (small
  // dicts, e.g. chat messages, are searched linearly).
  std::unordered_map<std::string, size_t> index;
  static constexpr size_t kLinearMax = 8;

  // Throws TypeError for unhashable keys (lists, dicts), as Python does.
  const Value* find(const Value& key) const;
  void insert_or_assign(Value key, Value value);
};

// A one-shot Python iterator (generator). Items are computed eagerly (filters are pure), but
// consumption is tracked so that iterating twice behaves like Python (the second pass is empty).
struct IteratorData final : HeapData {
  std::string type_name;  // "generator", "list_reverseiterator", ... (repr and error messages)
  std::vector<Value> items;
  size_t pos = 0;
};

struct UndefinedData final : HeapData {
  std::string hint;          // explicit message; when empty the message is built from name/obj_type
  std::string name;          // the missing variable / attribute / item (repr'd key for non-str items)
  std::string obj_type;      // e.g. "dict object" for attribute/item misses; empty for a missing variable
  bool name_is_attr = true;  // "has no attribute 'x'" vs "has no element 3"
  bool security = false;     // sandbox: using it raises SecurityError instead of UndefinedError
};

struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
};

// Interpreter objects that are not plain data.
class Object : public HeapData {
 public:
  virtual std::string type_name() const = 0;
  virtual std::string repr() const;
  // jinja2's getattr(obj, name): true and *out set when the attribute exists. `self` is the Value
  // holding this object (for bound methods).
  virtual bool get_attr(const Value& self, std::string_view name, Value* out) const;
  virtual bool callable() const { return false; }
  // Default: TypeError "'<type>' object is not callable".
  virtual Value call(Interpreter& interp, CallArgs& args);
};

class Value {
 public:
  Value() = default;  // Undefined without a name (jinja2's bare Undefined())

  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double f);
  static Value string(std::string s);
  static Value markup(std::string s);  // markupsafe.Markup (output of |safe, |escape)
  static Value list(std::vector<Value> items);
  static Value tuple(std::vector<Value> items);
  static Value sequence(std::shared_ptr<ListData> data);
  static Value dict(std::shared_ptr<DictData> data);
  static Value iterator(std::string type_name, std::vector<Value> items);
  static Value object(std::shared_ptr<Object> obj);

  // Undefined values; the message is what jinja2's Undefined would raise when used.
  static Value undefined(std::string name);       // "'name' is undefined"
  static Value undefined_hint(std::string hint);  // the hint verbatim
  static Value undefined_attr(const Value& obj,
                              std::string_view attr);                 // "'dict object' has no attribute 'x'"
  static Value undefined_item(const Value& obj, const Value& key);    // "list object has no element 3"
  static Value unsafe_attr(const Value& obj, std::string_view attr);  // sandbox SecurityError when used

  // JSON (objects keep their key order) to Python values, as json.loads would build them. Throws
  // TemplateError(kLimit) past kMaxNesting levels.
  static Value from_json(const nlohmann::ordered_json& j);

  ValueKind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == ValueKind::kUndefined; }
  bool is_none() const { return kind_ == ValueKind::kNone; }
  bool is_bool() const { return kind_ == ValueKind::kBool; }
  bool is_int() const { return kind_ == ValueKind::kInt; }  // not bool
  bool is_float() const { return kind_ == ValueKind::kFloat; }
  bool is_integral() const { return kind_ == ValueKind::kInt || kind_ == ValueKind::kBool; }
  bool is_number() const { return is_integral() || is_float(); }
  bool is_string() const { return kind_ == ValueKind::kString; }
  bool is_markup() const { return kind_ == ValueKind::kString && markup_; }
  bool is_list() const { return kind_ == ValueKind::kList; }  // any SeqKind
  bool is_dict() const { return kind_ == ValueKind::kDict; }
  bool is_iterator() const { return kind_ == ValueKind::kIterator; }
  bool is_object() const { return kind_ == ValueKind::kObject; }

  bool as_bool() const { return i_ != 0; }  // kBool
  int64_t as_int() const { return i_; }     // kInt or kBool
  double as_double() const;                 // any number
  const std::string& as_string() const;     // kString
  const ListData& as_list() const;          // kList
  const std::vector<Value>& items() const;  // kList
  SeqKind seq_kind() const { return as_list().seq; }
  bool is_tuple() const { return is_list() && as_list().seq == SeqKind::kTuple; }
  const DictData& as_dict() const;    // kDict
  IteratorData& as_iterator() const;  // kIterator
  Object& as_object() const;          // kObject
  template <typename T>
  T* object_as() const {
    return is_object() ? dynamic_cast<T*>(heap_.get()) : nullptr;
  }
  const UndefinedData* undefined_data() const;  // nullptr for a bare Undefined
  const HeapData* identity() const { return heap_.get(); }

  std::string undefined_message() const;
  // Raises the error jinja2's Undefined raises when used (UndefinedError or SecurityError).
  [[noreturn]] void fail_undefined() const;

  // Python type name: "str", "int", "dict", "NoneType", "Undefined", "tuple", ...
  std::string type_name() const;

 private:
  static Value from_json(const nlohmann::ordered_json& j, size_t depth);

  ValueKind kind_ = ValueKind::kUndefined;
  bool markup_ = false;
  union {
    int64_t i_ = 0;
    double f_;
  };
  std::shared_ptr<HeapData> heap_;
};

// ---- Python semantics ----

bool truthy(const Value& v);
std::string to_str(const Value& v);  // str(v); Undefined prints as ""
std::string repr(const Value& v);    // repr(v)
std::string float_repr(double f);    // repr(float): shortest round-trip digits, Python's layout
std::string str_repr(std::string_view s);
std::string dict_repr(const DictData& d);  // with the recursion guard of repr()
// Python ==. Undefined equals only Undefined; list != tuple; numbers compare across int/float/bool.
bool equals(const Value& a, const Value& b);
// Python ordering (<, <=, >, >=): returns <0, 0, >0. Throws TypeError when the types are unorderable,
// UndefinedError for Undefined.
int compare(const Value& a, const Value& b, std::string_view op);
// Canonical key for dict lookups and unique(); throws TypeError for unhashable values.
std::string hash_key(const Value& v);
// False for lists, dicts, dict views and iterators (tuples of unhashables are caught by hash_key).
bool is_hashable(const Value& v);
// len(v); throws TypeError when v has no length.
int64_t length(const Value& v);
// The items `for x in v` visits: str -> characters, dict -> keys, Undefined -> nothing, iterators are
// consumed. Throws TypeError for non-iterables.
std::vector<Value> iterate(const Value& v);
bool is_iterable(const Value& v);

}  // namespace loom::text::jinja
