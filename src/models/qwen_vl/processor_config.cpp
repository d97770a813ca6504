#include "models/qwen_vl/processor_config.h"

#include "models/qwen_vl/processor_json.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace loom::models::qwen_vl {
namespace {

using Json = nlohmann::json;
using detail::read_bool;
using detail::read_file;
using detail::read_int;

core::Status read_int32(const Json& j, const char* key, const std::string& origin, int32_t* out) {
  int64_t v = *out;
  LOOM_RETURN_IF_ERROR(read_int(j, key, origin, &v));
  if (v < 1 || v > 4096) return core::invalid_argument(origin + ": \"" + key + "\" out of range");
  *out = static_cast<int32_t>(v);
  return core::Status::ok_status();
}

core::Status read_triple(const Json& j, const char* key, const std::string& origin,
                         std::array<float, 3>* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return core::Status::ok_status();
  if (it->is_number()) {
    out->fill(it->get<float>());
    return core::Status::ok_status();
  }
  if (!it->is_array() || it->size() != 3)
    return core::invalid_argument(origin + ": \"" + key + "\" must be a number or a list of 3 numbers");
  for (size_t i = 0; i < 3; ++i) {
    if (!(*it)[i].is_number()) return core::invalid_argument(origin + ": \"" + key + "\" has a non-number");
    (*out)[i] = (*it)[i].get<float>();
  }
  return core::Status::ok_status();
}

core::Expected<ImageProcessorConfig> from_json(const Json& j, const std::string& origin) {
  if (!j.is_object())
    return core::invalid_argument(origin + ": image processor config must be a JSON object");
  ImageProcessorConfig c;
  if (auto it = j.find("size"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return core::invalid_argument(origin + ": \"size\" must be an object");
    LOOM_RETURN_IF_ERROR(read_int(*it, "shortest_edge", origin, &c.min_pixels));
    LOOM_RETURN_IF_ERROR(read_int(*it, "longest_edge", origin, &c.max_pixels));
    // Some older files spell the pixel bounds inside size.
    LOOM_RETURN_IF_ERROR(read_int(*it, "min_pixels", origin, &c.min_pixels));
    LOOM_RETURN_IF_ERROR(read_int(*it, "max_pixels", origin, &c.max_pixels));
  }
  LOOM_RETURN_IF_ERROR(read_int(j, "min_pixels", origin, &c.min_pixels));
  LOOM_RETURN_IF_ERROR(read_int(j, "max_pixels", origin, &c.max_pixels));
  LOOM_RETURN_IF_ERROR(read_int32(j, "patch_size", origin, &c.patch_size));
  LOOM_RETURN_IF_ERROR(read_int32(j, "temporal_patch_size", origin, &c.temporal_patch_size));
  LOOM_RETURN_IF_ERROR(read_int32(j, "merge_size", origin, &c.merge_size));
  LOOM_RETURN_IF_ERROR(read_triple(j, "image_mean", origin, &c.image_mean));
  LOOM_RETURN_IF_ERROR(read_triple(j, "image_std", origin, &c.image_std));
  if (auto it = j.find("rescale_factor"); it != j.end() && !it->is_null()) {
    if (!it->is_number()) return core::invalid_argument(origin + ": \"rescale_factor\" must be a number");
    c.rescale_factor = it->get<double>();
  }
  LOOM_RETURN_IF_ERROR(read_bool(j, "do_resize", origin, &c.do_resize));
  LOOM_RETURN_IF_ERROR(read_bool(j, "do_rescale", origin, &c.do_rescale));
  LOOM_RETURN_IF_ERROR(read_bool(j, "do_normalize", origin, &c.do_normalize));
  if (auto it = j.find("resample"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() != 3)
      return core::unsupported(origin + ": only \"resample\": 3 (bicubic) is supported");
  }
  LOOM_RETURN_IF_ERROR(c.validate().with_context(origin));
  return c;
}

}  // namespace

core::Status ImageProcessorConfig::validate() const {
  if (min_pixels <= 0 || max_pixels <= 0)
    return core::invalid_argument("min_pixels and max_pixels must be positive");
  if (min_pixels > max_pixels) return core::invalid_argument("min_pixels exceeds max_pixels");
  if (patch_size < 1 || temporal_patch_size < 1 || merge_size < 1)
    return core::invalid_argument("patch_size, temporal_patch_size and merge_size must be positive");
  for (float s : image_std)
    if (!(s != 0.0f)) return core::invalid_argument("image_std must be non-zero");
  if (!(rescale_factor > 0.0)) return core::invalid_argument("rescale_factor must be positive");
  return core::Status::ok_status();
}

core::Expected<ImageProcessorConfig> parse_image_processor_config(const std::string& json_text,
                                                                  const std::string& origin) {
  Json j = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return core::invalid_argument(origin + ": not valid JSON");
  return from_json(j, origin);
}

core::Expected<ImageProcessorConfig> load_image_processor_config(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const fs::path dir(model_dir);
  const fs::path nested = dir / "processor_config.json";
  if (fs::exists(nested)) {
    LOOM_ASSIGN_OR_RETURN(std::string text, read_file(nested));
    Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return core::invalid_argument(nested.string() + ": not valid JSON");
    if (j.is_object()) {
      if (auto it = j.find("image_processor"); it != j.end()) return from_json(*it, nested.string());
    }
  }
  const fs::path legacy = dir / "preprocessor_config.json";
  if (!fs::exists(legacy))
    return core::not_found(
        model_dir + ": no preprocessor_config.json and no \"image_processor\" in processor_config.json");
  LOOM_ASSIGN_OR_RETURN(std::string text, read_file(legacy));
  return parse_image_processor_config(text, legacy.string());
}

}  // namespace loom::models::qwen_vl
