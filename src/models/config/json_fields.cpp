#include "models/config/json_fields.h"

namespace loom::models::config_detail {

using nlohmann::json;

const json* FieldReader::find(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

void FieldReader::type_error(std::string_view path, std::string_view key, const char* want, const json& got) {
  fail(core::invalid_argument(join(path, key) + ": expected " + want + ", got " +
                              std::string(got.type_name()) + " " + got.dump()));
}

std::optional<int64_t> FieldReader::opt_int(const json& obj, std::string_view path, std::string_view key) {
  const json* v = find(obj, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      type_error(path, key, "an integer in int64 range", *v);
      return std::nullopt;
    }
    return v->get<int64_t>();
  }
  type_error(path, key, "an integer", *v);
  return std::nullopt;
}

std::optional<double> FieldReader::opt_number(const json& obj, std::string_view path, std::string_view key) {
  const json* v = find(obj, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_number()) return v->get<double>();
  type_error(path, key, "a number", *v);
  return std::nullopt;
}

std::optional<bool> FieldReader::opt_bool(const json& obj, std::string_view path, std::string_view key) {
  const json* v = find(obj, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_boolean()) return v->get<bool>();
  type_error(path, key, "a boolean", *v);
  return std::nullopt;
}

std::optional<std::string> FieldReader::opt_string(const json& obj, std::string_view path,
                                                   std::string_view key) {
  const json* v = find(obj, key);
  if (v == nullptr) return std::nullopt;
  if (v->is_string()) return v->get<std::string>();
  type_error(path, key, "a string", *v);
  return std::nullopt;
}

std::vector<int64_t> FieldReader::int_or_list(const json& obj, std::string_view path, std::string_view key) {
  const json* v = find(obj, key);
  if (v == nullptr) return {};
  if (v->is_number_integer()) {
    auto x = opt_int(obj, path, key);
    return x ? std::vector<int64_t>{*x} : std::vector<int64_t>{};
  }
  if (!v->is_array()) {
    type_error(path, key, "an integer or a list of integers", *v);
    return {};
  }
  std::vector<int64_t> out;
  for (const json& e : *v) {
    if (!e.is_number_integer() ||
        (e.is_number_unsigned() && e.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))) {
      type_error(path, key, "a list of integers", *v);
      return {};
    }
    out.push_back(e.get<int64_t>());
  }
  return out;
}

std::optional<std::vector<int64_t>> FieldReader::opt_int_list(const json& obj, std::string_view path,
                                                              std::string_view key) {
  const json* v = find(obj, key);
  if (v == nullptr) return std::nullopt;
  std::vector<int64_t> out;
  if (v->is_array()) {
    for (const json& e : *v) {
      if (!e.is_number_integer() ||
          (e.is_number_unsigned() && e.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)))
        break;
      out.push_back(e.get<int64_t>());
    }
    if (out.size() == v->size()) return out;
  }
  type_error(path, key, "a list of integers", *v);
  return std::nullopt;
}

int64_t FieldReader::required_int(const json& obj, std::string_view path, std::string_view key) {
  if (find(obj, key) == nullptr) {
    fail(core::invalid_argument(join(path, key) + " is missing"));
    return 0;
  }
  return opt_int(obj, path, key).value_or(0);
}

const json* FieldReader::object(const json& obj, std::string_view path, std::string_view key) {
  const json* v = find(obj, key);
  if (v == nullptr) return nullptr;
  if (!v->is_object()) {
    type_error(path, key, "an object", *v);
    return nullptr;
  }
  return v;
}

}  // namespace loom::models::config_detail
