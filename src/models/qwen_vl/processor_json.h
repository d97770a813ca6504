// Typed readers for processor config JSON (image and video processors share them). Absent or
// null keys leave the output unchanged; wrong types are InvalidArgument naming origin and key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace loom::models::qwen_vl::detail {

core::Status read_int(const nlohmann::json& j, const char* key, const std::string& origin, int64_t* out);
core::Status read_bool(const nlohmann::json& j, const char* key, const std::string& origin, bool* out);
// Whole file as text; IoError when it cannot be read.
core::Expected<std::string> read_file(const std::filesystem::path& p);

}  // namespace loom::models::qwen_vl::detail
