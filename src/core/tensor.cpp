#include "core/tensor.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <sstream>

namespace loom::core {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_to_string(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

Tensor Tensor::empty(Shape shape, DType dtype) {
  for (int64_t d : shape) LOOM_CHECK(d >= 0) << "negative dim in " << shape_to_string(shape);
  Tensor t;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = Device::kCpu;
  size_t bytes = t.nbytes();
  // Large buffers (pixel values, activations, converted weights) are 2 MiB aligned and asked to be
  // backed by transparent huge pages: first touch then faults once per 2 MiB instead of per 4 KiB
  // (a fresh 50 MB pixel tensor spent ~1/3 of the image processor's time in page faults).
  const size_t align = bytes >= (size_t{8} << 20) ? (size_t{2} << 20) : 64;
  size_t alloc = ((bytes + align - 1) / align) * align;
  if (alloc == 0) alloc = 64;
  void* p = std::aligned_alloc(align, alloc);
  LOOM_CHECK(p != nullptr) << "allocation of " << alloc << " bytes failed";
#ifdef MADV_HUGEPAGE
  if (align > 64) madvise(p, alloc, MADV_HUGEPAGE);  // advisory: ignored where THP is off
#endif
  t.owner_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  t.data_ = p;
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype) {
  Tensor t = empty(std::move(shape), dtype);
  std::memset(t.data_, 0, t.nbytes());
  return t;
}

Tensor Tensor::borrow(void* data, Shape shape, DType dtype, Device device, std::shared_ptr<void> keep_alive) {
  Tensor t;
  t.data_ = data;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  t.owner_ = std::move(keep_alive);
  return t;
}

Tensor Tensor::reshape(Shape shape) const {
  LOOM_CHECK(shape_numel(shape) == numel())
      << "reshape " << shape_to_string(shape_) << " -> " << shape_to_string(shape);
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  LOOM_CHECK(rank() >= 1 && begin >= 0 && begin <= end && end <= shape_[0])
      << "slice_rows [" << begin << ", " << end << ") of " << shape_to_string(shape_);
  LOOM_CHECK(dtype_ != DType::kI4Packed) << "slice_rows on packed int4";
  Tensor t = *this;
  int64_t row = numel() / (shape_[0] == 0 ? 1 : shape_[0]);
  t.data_ = static_cast<char*>(data_) + static_cast<size_t>(begin * row) * dtype_size(dtype_);
  t.shape_[0] = end - begin;
  return t;
}

Tensor Tensor::to_f32() const {
  LOOM_CHECK(device_ == Device::kCpu) << "to_f32 on a non-CPU tensor";
  Tensor out = empty(shape_, DType::kF32);
  convert_to_f32(data_, dtype_, out.data_as<float>(), static_cast<size_t>(numel()));
  return out;
}

}  // namespace loom::core
