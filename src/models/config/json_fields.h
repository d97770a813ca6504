// Typed reads from a JSON object for config parsing: every failure names the field by its path
// ("thinker_config.text_config.hidden_size") and the first one is kept, so parsers read all fields
// straight through and check status() once. Used by src/models/config and by the vision configs of
// the models layer (vision_common.h); not part of the public models API.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace loom::models::config_detail {

class FieldReader {
 public:
  const core::Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }
  void fail(core::Status s) {
    if (status_.ok()) status_ = std::move(s);
  }

  // `obj` must be a JSON object; `path` is its location ("" for the top level).
  static std::string join(std::string_view path, std::string_view key) {
    return path.empty() ? std::string(key) : std::string(path) + "." + std::string(key);
  }
  // The value at key, or nullptr when the key is absent or null.
  static const nlohmann::json* find(const nlohmann::json& obj, std::string_view key);
  static bool present(const nlohmann::json& obj, std::string_view key) {
    return obj.is_object() && obj.contains(key);
  }

  // Absent or null -> nullopt. Wrong type -> error, nullopt.
  std::optional<int64_t> opt_int(const nlohmann::json& obj, std::string_view path, std::string_view key);
  std::optional<double> opt_number(const nlohmann::json& obj, std::string_view path, std::string_view key);
  std::optional<bool> opt_bool(const nlohmann::json& obj, std::string_view path, std::string_view key);
  std::optional<std::string> opt_string(const nlohmann::json& obj, std::string_view path,
                                        std::string_view key);
  // A list of integers; absent or null -> nullopt; anything else (a bare integer too) -> error, nullopt.
  std::optional<std::vector<int64_t>> opt_int_list(const nlohmann::json& obj, std::string_view path,
                                                   std::string_view key);
  // An integer or a list of integers (eos_token_id); absent or null -> empty.
  std::vector<int64_t> int_or_list(const nlohmann::json& obj, std::string_view path, std::string_view key);

  // Missing/null -> InvalidArgument "<path> is missing"; returns 0.
  int64_t required_int(const nlohmann::json& obj, std::string_view path, std::string_view key);
  int64_t int_or(const nlohmann::json& obj, std::string_view path, std::string_view key, int64_t def) {
    return opt_int(obj, path, key).value_or(def);
  }
  double number_or(const nlohmann::json& obj, std::string_view path, std::string_view key, double def) {
    return opt_number(obj, path, key).value_or(def);
  }
  bool bool_or(const nlohmann::json& obj, std::string_view path, std::string_view key, bool def) {
    return opt_bool(obj, path, key).value_or(def);
  }

  // The sub-object at key; nullptr when absent/null, error (and nullptr) when not an object.
  const nlohmann::json* object(const nlohmann::json& obj, std::string_view path, std::string_view key);

 private:
  void type_error(std::string_view path, std::string_view key, const char* want, const nlohmann::json& got);
  core::Status status_;
};

}  // namespace loom::models::config_detail
