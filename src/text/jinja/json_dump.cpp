#include "text/jinja/json_dump.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "text/jinja/error.h"
#include "text/jinja/unicode.h"

namespace loom::text::jinja {
namespace {

void encode_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  size_t pos = 0;
  char buf[16];
  while (pos < s.size()) {
    unsigned char b = static_cast<unsigned char>(s[pos]);
    if (b < 0x80) {
      ++pos;
      switch (b) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (b < 0x20 || (ensure_ascii && b == 0x7F)) {
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(b));
            out += buf;
          } else {
            out.push_back(static_cast<char>(b));
          }
      }
      continue;
    }
    size_t start = pos;
    char32_t cp = unicode::decode(s, &pos);
    if (!ensure_ascii) {
      out.append(s, start, pos - start);
      continue;
    }
    if (cp >= 0x10000) {
      char32_t v = cp - 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 | (v >> 10)),
                    static_cast<unsigned>(0xDC00 | (v & 0x3FF)));
    } else {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
    }
    out += buf;
  }
  out.push_back('"');
}

std::string float_json(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
  return float_repr(f);
}

class Encoder {
 public:
  explicit Encoder(const JsonDumpOptions& o) : o_(o) {
    item_sep_ = o.item_separator ? *o.item_separator : (o.indent ? "," : ", ");
  }

  void encode(std::string& out, const Value& v, int level) {
    if (v.is_list() || v.is_dict()) {
      // json.dumps' check_circular; the depth bound also protects the stack.
      const void* id = v.identity();
      if (std::find(active_.begin(), active_.end(), id) != active_.end())
        throw_type_error("Circular reference detected");
      if (active_.size() >= kMaxNesting) throw_error(ErrorKind::kLimit, "maximum recursion depth exceeded");
      active_.push_back(id);
      encode_value(out, v, level);
      active_.pop_back();
      return;
    }
    encode_value(out, v, level);
  }

 private:
  void encode_value(std::string& out, const Value& v, int level) {
    switch (v.kind()) {
      case ValueKind::kNone: out += "null"; return;
      case ValueKind::kBool: out += v.as_bool() ? "true" : "false"; return;
      case ValueKind::kInt: out += std::to_string(v.as_int()); return;
      case ValueKind::kFloat: out += float_json(v.as_double()); return;
      case ValueKind::kString: encode_string(out, v.as_string(), o_.ensure_ascii); return;
      case ValueKind::kList:
        if (v.seq_kind() == SeqKind::kList || v.seq_kind() == SeqKind::kTuple) {
          encode_list(out, v.items(), level);
          return;
        }
        break;
      case ValueKind::kDict: encode_dict(out, v.as_dict(), level); return;
      default: break;
    }
    throw_type_error("Object of type " + v.type_name() + " is not JSON serializable");
  }

  void newline(std::string& out, int level) {
    out.push_back('\n');
    for (int i = 0; i < level; ++i) out += *o_.indent;
  }

  void encode_list(std::string& out, const std::vector<Value>& items, int level) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    out.push_back('[');
    if (o_.indent) newline(out, level + 1);
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) {
        out += item_sep_;
        if (o_.indent) newline(out, level + 1);
      }
      encode(out, items[i], level + 1);
    }
    if (o_.indent) newline(out, level);
    out.push_back(']');
  }

  static std::string key_string(const Value& k) {
    switch (k.kind()) {
      case ValueKind::kString: return k.as_string();
      case ValueKind::kFloat: return float_json(k.as_double());
      case ValueKind::kBool: return k.as_bool() ? "true" : "false";
      case ValueKind::kNone: return "null";
      case ValueKind::kInt: return std::to_string(k.as_int());
      default: break;
    }
    throw_type_error("keys must be str, int, float, bool or None, not " + k.type_name());
  }

  void encode_dict(std::string& out, const DictData& d, int level) {
    if (d.entries.empty()) {
      out += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& e : d.entries) entries.push_back(&e);
    if (o_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto* a, const auto* b) { return compare(a->first, b->first, "<") < 0; });
    }
    out.push_back('{');
    if (o_.indent) newline(out, level + 1);
    bool first = true;
    for (const auto* e : entries) {
      if (!first) {
        out += item_sep_;
        if (o_.indent) newline(out, level + 1);
      }
      first = false;
      encode_string(out, key_string(e->first), o_.ensure_ascii);
      out += o_.key_separator;
      encode(out, e->second, level + 1);
    }
    if (o_.indent) newline(out, level);
    out.push_back('}');
  }

  const JsonDumpOptions& o_;
  std::string item_sep_;
  std::vector<const void*> active_;
};

}  // namespace

std::string json_dumps(const Value& v, const JsonDumpOptions& options) {
  std::string out;
  Encoder(options).encode(out, v, 0);
  return out;
}

}  // namespace loom::text::jinja
