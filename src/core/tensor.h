// Tensor: a dense, row-major (contiguous) n-d array on one device.
// Owning tensors share their buffer (copying a Tensor is cheap and aliases).
// A buffer may also borrow memory it does not own (e.g. an mmapped checkpoint).
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"

namespace loom::core {

enum class Device : uint8_t { kCpu, kCuda };

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& s);
std::string shape_to_string(const Shape& s);

class Tensor {
 public:
  Tensor() = default;

  // Allocates an uninitialised CPU tensor (64-byte aligned).
  static Tensor empty(Shape shape, DType dtype);
  static Tensor zeros(Shape shape, DType dtype);
  // Wraps memory owned elsewhere; `keep_alive` (may be null) holds the owner.
  static Tensor borrow(void* data, Shape shape, DType dtype, Device device, std::shared_ptr<void> keep_alive);

  bool defined() const { return data_ != nullptr || owner_ != nullptr; }
  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const {
    LOOM_CHECK(i >= -rank() && i < rank()) << "dim " << i << " of rank " << rank();
    return shape_[i < 0 ? i + rank() : i];
  }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return element_bytes(dtype_, static_cast<size_t>(numel())); }

  // Same storage, new shape with the same number of elements.
  Tensor reshape(Shape shape) const;
  // Rows [begin, end) along dim 0, sharing storage.
  Tensor slice_rows(int64_t begin, int64_t end) const;
  // Deep copy to a new CPU f32 tensor (from f32/f16/bf16).
  Tensor to_f32() const;

 private:
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::kF32;
  Device device_ = Device::kCpu;
  std::shared_ptr<void> owner_;
};

}  // namespace loom::core
