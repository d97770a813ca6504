#include "models/qwen_vl/processor_json.h"

#include <fstream>
#include <sstream>

namespace loom::models::qwen_vl::detail {

core::Status read_int(const nlohmann::json& j, const char* key, const std::string& origin, int64_t* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return core::Status::ok_status();
  if (!it->is_number_integer())
    return core::invalid_argument(origin + ": \"" + key + "\" must be an integer");
  *out = it->get<int64_t>();
  return core::Status::ok_status();
}

core::Status read_bool(const nlohmann::json& j, const char* key, const std::string& origin, bool* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return core::Status::ok_status();
  if (!it->is_boolean()) return core::invalid_argument(origin + ": \"" + key + "\" must be a boolean");
  *out = it->get<bool>();
  return core::Status::ok_status();
}

core::Expected<std::string> read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return core::io_error("cannot read " + p.string());
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace loom::models::qwen_vl::detail
