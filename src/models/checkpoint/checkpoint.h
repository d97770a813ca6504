// All weights of one model folder, memory-mapped read-only.
//
// Which files (transformers' order of preference):
//   1. model.safetensors
//   2. model.safetensors.index.json + the shards its weight_map names
//   3. otherwise every *.safetensors in the folder (sorted by file name)
// A path to a single .safetensors file is accepted as well.
// Every file's header is validated at open (see safetensors.h). Sharded: a shard named in the index
// but absent is NotFound; a tensor the index maps to a shard that lacks it is CorruptData; tensors
// present in a shard but not in the weight_map are indexed too. The same name in two files is
// CorruptData unless the index says which one wins.
// A Checkpoint is immutable after open(): its const methods are safe to call from several threads.
// Copies are cheap and share the mappings; tensors from get() keep their mapping alive on their own.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "models/checkpoint/safetensors.h"

namespace loom::models {

class Checkpoint {
 public:
  static core::Expected<Checkpoint> open(const std::string& model_dir);

  bool has(std::string_view name) const;
  std::vector<std::string> names() const;  // sorted
  // NotFound if missing; Unsupported if its dtype has no core::DType (e.g. F64).
  core::Expected<TensorInfo> info(std::string_view name) const;
  // Zero-copy view into the mapping (read-only memory: never write through it). NotFound if missing.
  core::Expected<core::Tensor> get(std::string_view name) const;
  // As get(), and InvalidArgument when the stored shape differs from `expected`.
  core::Expected<core::Tensor> get(std::string_view name, const core::Shape& expected) const;
  // Tensors whose names start with prefix (sorted).
  std::vector<std::string> names_with_prefix(std::string_view prefix) const;

  // The files backing this checkpoint, in the order they were opened.
  std::vector<std::string> files() const;
  size_t size() const { return tensors_.size(); }

 private:
  struct Slot {
    std::shared_ptr<const SafetensorsFile> file;
    const SafetensorsEntry* entry = nullptr;  // points into file->entries()
  };
  core::Status add_file(std::shared_ptr<const SafetensorsFile> file);

  std::vector<std::shared_ptr<const SafetensorsFile>> files_;
  std::map<std::string, Slot, std::less<>> tensors_;
};

}  // namespace loom::models
