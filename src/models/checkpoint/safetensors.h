// One safetensors file, memory-mapped read-only, its header parsed and validated once at open.
//
// Format (https://github.com/huggingface/safetensors): 8-byte little-endian header length N, then N
// bytes of JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}},
// then the data section; offsets are relative to the start of the data section.
// Validation at open (every failure is a Status naming the file and the tensor, never a crash):
//   file shorter than 8 + N, N above 100 MB, header not a JSON object, entry not an object,
//   shape not a list of non-negative integers, offsets not [begin <= end] inside the data section,
//   end - begin != bytes implied by dtype and shape, two tensors' byte ranges overlapping.
// Gaps between tensors are allowed. A dtype we know but do not compute with (F64, U16, U32, U64,
// F8_E8M0, F4, F6_*, C64) is indexed; asking for that tensor answers Unsupported. An unknown dtype
// string is CorruptData.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"

namespace loom::models {

struct TensorInfo {
  std::string name;
  core::DType dtype = core::DType::kF32;
  core::Shape shape;
};

// One tensor's entry in a safetensors header.
struct SafetensorsEntry {
  TensorInfo info;
  std::string dtype_name;  // as spelled in the file ("BF16", "F64", ...)
  bool supported = true;   // false: a dtype core::DType cannot represent; info.dtype is meaningless
  uint64_t begin = 0;      // byte range in the data section, [begin, end)
  uint64_t end = 0;
};

class SafetensorsFile : public std::enable_shared_from_this<SafetensorsFile> {
 public:
  // Maps and validates `path`. NotFound when it does not exist, IoError when it cannot be read,
  // CorruptData / Unsupported as listed above.
  static core::Expected<std::shared_ptr<const SafetensorsFile>> open(const std::string& path);

  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  // Sorted by name.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  // nullptr when absent.
  const SafetensorsEntry* find(std::string_view name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  uint64_t file_size() const { return size_; }

  // Zero-copy view of one entry; the tensor keeps this file's mapping alive. The memory is mapped
  // read-only: writing through the tensor is a bug (it faults). When the data is not aligned to the
  // element size (the format does not promise alignment), the tensor is an aligned owned copy instead.
  // Unsupported for entries whose dtype has no core::DType.
  core::Expected<core::Tensor> tensor(const SafetensorsEntry& entry) const;

 private:
  SafetensorsFile() = default;
  core::Status parse_header(std::string_view header, uint64_t data_size);

  std::string path_;
  const uint8_t* base_ = nullptr;  // start of the mapping (the 8-byte length)
  uint64_t size_ = 0;              // file size in bytes
  uint64_t data_offset_ = 0;       // 8 + N
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Spelling of a dtype in safetensors headers ("F32", "BF16", ...). Unsupported for kI4Packed, which
// has no safetensors dtype (GPTQ/AWQ pack int4 into I32 tensors).
core::Expected<std::string> safetensors_dtype_name(core::DType t);

// Writes `tensors` (CPU, contiguous) to `path` as a safetensors file, in the given order, header
// padded with spaces to a multiple of 8 bytes as the reference writer does. For tests and tools.
core::Status write_safetensors(const std::string& path,
                               const std::vector<std::pair<std::string, core::Tensor>>& tensors,
                               const std::map<std::string, std::string>& metadata = {});

}  // namespace loom::models
