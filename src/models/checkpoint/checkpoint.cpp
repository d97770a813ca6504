#include "models/checkpoint/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace loom::models {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSingleName = "model.safetensors";
constexpr const char* kIndexName = "model.safetensors.index.json";

// Shard names come from a file we did not write: keep them inside the model folder.
bool is_safe_relative(const std::string& name) {
  fs::path p(name);
  if (name.empty() || p.is_absolute()) return false;
  for (const auto& part : p) {
    if (part == "..") return false;
  }
  return true;
}

core::Expected<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return core::io_error(path.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return core::io_error(path.string() + ": read failed");
  return ss.str();
}

}  // namespace

core::Status Checkpoint::add_file(std::shared_ptr<const SafetensorsFile> file) {
  for (const SafetensorsEntry& e : file->entries()) {
    auto [it, inserted] = tensors_.try_emplace(e.info.name, Slot{file, &e});
    if (!inserted)
      return core::corrupt_data("tensor '" + e.info.name + "' appears in both " + it->second.file->path() +
                                " and " + file->path());
  }
  files_.push_back(std::move(file));
  return {};
}

core::Expected<Checkpoint> Checkpoint::open(const std::string& model_dir) {
  std::error_code ec;
  const fs::path dir(model_dir);
  Checkpoint ckpt;

  if (fs::is_regular_file(dir, ec)) {
    if (dir.extension() != ".safetensors")
      return core::invalid_argument(model_dir + ": expected a model folder or a .safetensors file");
    LOOM_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open(model_dir));
    LOOM_RETURN_IF_ERROR(ckpt.add_file(std::move(file)));
    return ckpt;
  }
  if (!fs::is_directory(dir, ec)) return core::not_found(model_dir + ": no such model folder");

  const fs::path single = dir / kSingleName;
  const fs::path index = dir / kIndexName;
  if (fs::exists(single, ec)) {
    LOOM_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open(single.string()));
    LOOM_RETURN_IF_ERROR(ckpt.add_file(std::move(file)));
    return ckpt;
  }

  if (fs::exists(index, ec)) {
    const std::string where = index.string();
    LOOM_ASSIGN_OR_RETURN(std::string text, read_text(index));
    json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return core::corrupt_data(where + ": not a JSON object");
    auto wm = j.find("weight_map");
    if (wm == j.end() || !wm->is_object()) return core::corrupt_data(where + ": missing weight_map object");

    std::map<std::string, std::string> weight_map;  // tensor -> shard file name
    std::set<std::string> shard_names;
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it.value().is_string())
        return core::corrupt_data(where + ": weight_map['" + it.key() + "'] is not a file name");
      std::string shard = it.value().get<std::string>();
      if (!is_safe_relative(shard))
        return core::corrupt_data(where + ": shard name '" + shard + "' leaves the model folder");
      weight_map.emplace(it.key(), shard);
      shard_names.insert(shard);
    }
    std::map<std::string, std::shared_ptr<const SafetensorsFile>> shards;
    for (const std::string& name : shard_names) {
      auto file = SafetensorsFile::open((dir / name).string());
      if (!file.ok()) {
        if (file.status().code() == core::StatusCode::kNotFound)
          return core::not_found(where + " names shard '" + name + "', which is missing");
        return file.status();
      }
      shards.emplace(name, std::move(file).value());
    }
    for (const auto& [tensor, shard] : weight_map) {
      const auto& file = shards.at(shard);
      const SafetensorsEntry* e = file->find(tensor);
      if (e == nullptr)
        return core::corrupt_data(where + " maps tensor '" + tensor + "' to '" + shard +
                                  "', which has no such tensor");
      ckpt.tensors_.emplace(tensor, Slot{file, e});
    }
    // Tensors the index forgot: indexed as well, as long as the name is unambiguous.
    for (const auto& [name, file] : shards) {
      for (const SafetensorsEntry& e : file->entries()) {
        if (weight_map.count(e.info.name) != 0) continue;
        auto [it, inserted] = ckpt.tensors_.try_emplace(e.info.name, Slot{file, &e});
        if (!inserted)
          return core::corrupt_data("tensor '" + e.info.name + "' appears in both " +
                                    it->second.file->path() + " and " + file->path() + " and " + where +
                                    " does not say which to use");
      }
      ckpt.files_.push_back(file);
    }
    return ckpt;
  }

  std::vector<fs::path> found;
  for (const auto& de : fs::directory_iterator(dir, ec)) {
    if (de.is_regular_file(ec) && de.path().extension() == ".safetensors") found.push_back(de.path());
  }
  if (ec) return core::io_error(model_dir + ": cannot list: " + ec.message());
  if (found.empty())
    return core::not_found(model_dir + ": no " + kSingleName + ", " + kIndexName +
                           " or other *.safetensors file");
  std::sort(found.begin(), found.end());
  for (const auto& p : found) {
    LOOM_ASSIGN_OR_RETURN(auto file, SafetensorsFile::open(p.string()));
    LOOM_RETURN_IF_ERROR(ckpt.add_file(std::move(file)));
  }
  return ckpt;
}

bool Checkpoint::has(std::string_view name) const {
  return tensors_.find(name) != tensors_.end();
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, slot] : tensors_) out.push_back(name);
  return out;
}

std::vector<std::string> Checkpoint::names_with_prefix(std::string_view prefix) const {
  std::vector<std::string> out;
  for (auto it = tensors_.lower_bound(prefix); it != tensors_.end(); ++it) {
    if (it->first.compare(0, prefix.size(), prefix) != 0) break;
    out.push_back(it->first);
  }
  return out;
}

std::vector<std::string> Checkpoint::files() const {
  std::vector<std::string> out;
  for (const auto& f : files_) out.push_back(f->path());
  return out;
}

core::Expected<TensorInfo> Checkpoint::info(std::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    return core::not_found("tensor '" + std::string(name) + "' is not in the checkpoint");
  const SafetensorsEntry& e = *it->second.entry;
  if (!e.supported)
    return core::unsupported(it->second.file->path() + ": tensor '" + e.info.name + "' has dtype " +
                             e.dtype_name + ", which Loom does not support");
  return e.info;
}

core::Expected<core::Tensor> Checkpoint::get(std::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    return core::not_found("tensor '" + std::string(name) + "' is not in the checkpoint");
  return it->second.file->tensor(*it->second.entry);
}

core::Expected<core::Tensor> Checkpoint::get(std::string_view name, const core::Shape& expected) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    return core::not_found("tensor '" + std::string(name) + "' is not in the checkpoint");
  const SafetensorsEntry& e = *it->second.entry;
  if (e.info.shape != expected)
    return core::invalid_argument(it->second.file->path() + ": tensor '" + e.info.name + "' has shape " +
                                  core::shape_to_string(e.info.shape) + ", expected " +
                                  core::shape_to_string(expected));
  return it->second.file->tensor(e);
}

}  // namespace loom::models
