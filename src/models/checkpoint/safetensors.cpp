#include "models/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>

namespace loom::models {
namespace {

using nlohmann::json;

// The reference implementation refuses headers above 100 MB; a larger length is a corrupt file,
// not a reason to read gigabytes of "JSON".
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeEntry {
  std::string_view name;
  std::optional<core::DType> dtype;  // nullopt: known to safetensors, not representable here
  uint32_t bits;                     // bits per element
};

constexpr DTypeEntry kDTypes[] = {
    {"F32", core::DType::kF32, 32},
    {"F16", core::DType::kF16, 16},
    {"BF16", core::DType::kBF16, 16},
    {"F8_E4M3", core::DType::kF8E4M3, 8},
    {"F8_E5M2", core::DType::kF8E5M2, 8},
    {"I8", core::DType::kI8, 8},
    {"U8", core::DType::kU8, 8},
    {"I16", core::DType::kI16, 16},
    {"I32", core::DType::kI32, 32},
    {"I64", core::DType::kI64, 64},
    {"BOOL", core::DType::kBool, 8},
    {"F64", std::nullopt, 64},
    {"U16", std::nullopt, 16},
    {"U32", std::nullopt, 32},
    {"U64", std::nullopt, 64},
    {"C64", std::nullopt, 64},
    {"F8_E8M0", std::nullopt, 8},
    {"F6_E2M3", std::nullopt, 6},
    {"F6_E3M2", std::nullopt, 6},
    {"F4", std::nullopt, 4},
};

const DTypeEntry* find_dtype(std::string_view name) {
  for (const auto& e : kDTypes) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::string errno_text() {
  return std::strerror(errno);
}

}  // namespace

SafetensorsFile::~SafetensorsFile() {
  if (base_ != nullptr) munmap(const_cast<uint8_t*>(base_), size_);
}

core::Expected<std::shared_ptr<const SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return core::not_found(path + ": no such file");
    return core::io_error(path + ": cannot open: " + errno_text());
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    std::string err = errno_text();
    ::close(fd);
    return core::io_error(path + ": cannot stat: " + err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return core::invalid_argument(path + ": not a regular file");
  }
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->size_ = static_cast<uint64_t>(st.st_size);
  if (file->size_ < 8) {
    ::close(fd);
    return core::corrupt_data(path + ": truncated: " + std::to_string(file->size_) +
                              " bytes, too short for the 8-byte header length");
  }
  void* p = mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  std::string map_err = p == MAP_FAILED ? errno_text() : "";
  ::close(fd);  // the mapping keeps the file open
  if (p == MAP_FAILED) return core::io_error(path + ": mmap failed: " + map_err);
  file->base_ = static_cast<const uint8_t*>(p);

  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file->base_[i];  // little-endian u64
  if (n > kMaxHeaderBytes)
    return core::corrupt_data(path + ": header length " + std::to_string(n) + " exceeds the 100 MB limit");
  if (n > file->size_ - 8)
    return core::corrupt_data(path + ": truncated: header length " + std::to_string(n) +
                              " but the file has " + std::to_string(file->size_ - 8) +
                              " bytes after the length");
  file->data_offset_ = 8 + n;
  std::string_view header(reinterpret_cast<const char*>(file->base_ + 8), n);
  LOOM_RETURN_IF_ERROR(file->parse_header(header, file->size_ - file->data_offset_));
  return std::shared_ptr<const SafetensorsFile>(std::move(file));
}

core::Status SafetensorsFile::parse_header(std::string_view header, uint64_t data_size) {
  json j = json::parse(header.begin(), header.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return core::corrupt_data(path_ + ": header is not valid JSON");
  if (!j.is_object()) return core::corrupt_data(path_ + ": header is not a JSON object");

  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) return core::corrupt_data(path_ + ": __metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          return core::corrupt_data(path_ + ": __metadata__ value '" + m.key() + "' is not a string");
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = path_ + ": tensor '" + name + "'";
    if (!v.is_object()) return core::corrupt_data(where + ": header entry is not an object");
    auto dt = v.find("dtype");
    auto sh = v.find("shape");
    auto off = v.find("data_offsets");
    if (dt == v.end() || !dt->is_string()) return core::corrupt_data(where + ": missing or non-string dtype");
    if (sh == v.end() || !sh->is_array()) return core::corrupt_data(where + ": missing or non-list shape");
    if (off == v.end() || !off->is_array() || off->size() != 2)
      return core::corrupt_data(where + ": data_offsets must be a list of two integers");

    SafetensorsEntry e;
    e.info.name = name;
    e.dtype_name = dt->get<std::string>();
    const DTypeEntry* d = find_dtype(e.dtype_name);
    if (d == nullptr) return core::corrupt_data(where + ": unknown dtype '" + e.dtype_name + "'");
    e.supported = d->dtype.has_value();
    if (e.supported) e.info.dtype = *d->dtype;

    uint64_t numel = 1;
    for (const json& dim : *sh) {
      if (!dim.is_number_unsigned())  // nlohmann parses non-negative integer literals as unsigned
        return core::corrupt_data(where + ": shape entries must be non-negative integers");
      uint64_t dv = dim.get<uint64_t>();
      if (dv > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(numel, dv, &numel))
        return core::corrupt_data(where + ": shape overflows");
      e.info.shape.push_back(static_cast<int64_t>(dv));
    }
    for (const json& o : *off) {
      if (!o.is_number_unsigned())
        return core::corrupt_data(where + ": data_offsets must be non-negative integers");
    }
    e.begin = (*off)[0].get<uint64_t>();
    e.end = (*off)[1].get<uint64_t>();
    if (e.begin > e.end || e.end > data_size)
      return core::corrupt_data(where + ": data_offsets [" + std::to_string(e.begin) + ", " +
                                std::to_string(e.end) + "] out of bounds of the " +
                                std::to_string(data_size) + "-byte data section");
    unsigned __int128 bits = static_cast<unsigned __int128>(numel) * d->bits;
    unsigned __int128 want = (bits + 7) / 8;
    if (want != e.end - e.begin)
      return core::corrupt_data(where + ": " + std::to_string(e.end - e.begin) + " bytes for dtype " +
                                e.dtype_name + " and shape " + core::shape_to_string(e.info.shape) +
                                ", which need " + std::to_string(static_cast<uint64_t>(want)));
    entries_.push_back(std::move(e));
  }

  // Byte ranges must not overlap (empty tensors occupy nothing and may share an offset).
  std::vector<const SafetensorsEntry*> by_offset;
  for (const auto& e : entries_) {
    if (e.end > e.begin) by_offset.push_back(&e);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const SafetensorsEntry* a, const SafetensorsEntry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->begin < by_offset[i - 1]->end)
      return core::corrupt_data(path_ + ": tensors '" + by_offset[i - 1]->info.name + "' and '" +
                                by_offset[i]->info.name + "' overlap");
  }
  std::sort(entries_.begin(), entries_.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) { return a.info.name < b.info.name; });
  return {};
}

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const SafetensorsEntry& e, std::string_view n) { return e.info.name < n; });
  if (it == entries_.end() || it->info.name != name) return nullptr;
  return &*it;
}

core::Expected<core::Tensor> SafetensorsFile::tensor(const SafetensorsEntry& entry) const {
  if (!entry.supported)
    return core::unsupported(path_ + ": tensor '" + entry.info.name + "' has dtype " + entry.dtype_name +
                             ", which Loom does not support");
  const uint8_t* p = base_ + data_offset_ + entry.begin;
  const size_t align = core::dtype_size(entry.info.dtype);
  if (align > 1 && reinterpret_cast<uintptr_t>(p) % align != 0) {
    core::Tensor copy = core::Tensor::empty(entry.info.shape, entry.info.dtype);
    std::memcpy(copy.data(), p, entry.end - entry.begin);
    return copy;
  }
  std::shared_ptr<SafetensorsFile> self = std::const_pointer_cast<SafetensorsFile>(shared_from_this());
  return core::Tensor::borrow(const_cast<uint8_t*>(p), entry.info.shape, entry.info.dtype, core::Device::kCpu,
                              std::move(self));
}

core::Expected<std::string> safetensors_dtype_name(core::DType t) {
  for (const auto& e : kDTypes) {
    if (e.dtype.has_value() && *e.dtype == t) return std::string(e.name);
  }
  return core::unsupported("dtype " + std::string(core::dtype_name(t)) + " has no safetensors spelling");
}

core::Status write_safetensors(const std::string& path,
                               const std::vector<std::pair<std::string, core::Tensor>>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") return core::invalid_argument("tensor name __metadata__ is reserved");
    if (header.contains(name)) return core::invalid_argument("duplicate tensor name '" + name + "'");
    if (!t.defined() || t.device() != core::Device::kCpu)
      return core::invalid_argument("tensor '" + name + "' is not a defined CPU tensor");
    LOOM_ASSIGN_OR_RETURN(std::string dtype, safetensors_dtype_name(t.dtype()));
    const uint64_t bytes = t.nbytes();
    header[name] = {{"dtype", dtype}, {"shape", t.shape()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return core::io_error(path + ": cannot open for writing: " + errno_text());
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& [name, t] : tensors) {
    out.write(static_cast<const char*>(t.data()), static_cast<std::streamsize>(t.nbytes()));
  }
  out.close();
  if (!out) return core::io_error(path + ": write failed");
  return {};
}

}  // namespace loom::models
