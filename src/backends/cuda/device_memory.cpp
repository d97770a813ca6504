#include "backends/cuda/device_memory.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "backends/cuda/cuda_check.h"

namespace loom::backends::cuda {

namespace {

constexpr size_t kMiB = size_t{1} << 20;

size_t align_up(size_t x, size_t a) {
  return (x + a - 1) / a * a;
}
size_t align_down(size_t x, size_t a) {
  return x / a * a;
}

std::string mib(size_t bytes) {
  return std::to_string(static_cast<double>(bytes) / static_cast<double>(kMiB)) + " MiB";
}

}  // namespace

// ---- DeviceArena ------------------------------------------------------------------------------

DeviceArena::DeviceArena(std::shared_ptr<void> block, size_t capacity)
    : block_(std::move(block)),
      base_(static_cast<char*>(block_.get())),
      capacity_(capacity),
      scratch_begin_(capacity) {}

core::Expected<std::unique_ptr<DeviceArena>> DeviceArena::create(size_t bytes) {
  const size_t capacity = align_up(bytes, kArenaAlignment);
  void* p = nullptr;
  if (capacity > 0) {
    const cudaError_t err = cudaMalloc(&p, capacity);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();  // an allocation failure is not sticky; clear it
      return core::resource_exhausted("DeviceArena: cudaMalloc of " + mib(capacity) +
                                      " failed: " + cudaGetErrorString(err));
    }
  }
  // The deleter ignores errors: at teardown a broken context must not turn into an abort.
  std::shared_ptr<void> block(p, [](void* q) {
    if (q != nullptr) (void)cudaFree(q);
  });
  return std::unique_ptr<DeviceArena>(new DeviceArena(std::move(block), capacity));
}

core::Expected<std::unique_ptr<DeviceArena>> DeviceArena::create_fraction(double fraction) {
  if (!(fraction > 0.0 && fraction <= 1.0)) {
    return core::invalid_argument("gpu memory utilization must be in (0, 1], got " +
                                  std::to_string(fraction));
  }
  size_t free_bytes = 0, total_bytes = 0;
  LOOM_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
  const size_t used = total_bytes - free_bytes;
  const size_t budget = static_cast<size_t>(fraction * static_cast<double>(total_bytes));
  const size_t granule = 2 * kMiB;
  if (budget <= used + granule) {
    return core::resource_exhausted("DeviceArena: gpu memory utilization " + std::to_string(fraction) +
                                    " allows " + mib(budget) + " of " + mib(total_bytes) + ", but " +
                                    mib(used) + " are already in use");
  }
  return create(align_down(budget - used, granule));
}

core::Expected<void*> DeviceArena::allocate(size_t bytes) {
  const size_t size = align_up(bytes, kArenaAlignment);
  if (size > available()) {
    return core::resource_exhausted("DeviceArena: persistent allocation of " + mib(size) + " does not fit: " +
                                    mib(available()) + " free of " + mib(capacity_) + " (persistent " +
                                    mib(persistent_end_) + ", scratch " + mib(scratch_used()) + ")");
  }
  void* p = base_ + persistent_end_;
  persistent_end_ += size;
  return p;
}

core::Expected<void*> DeviceArena::allocate_scratch(size_t bytes) {
  const size_t size = align_up(bytes, kArenaAlignment);
  if (size > available()) {
    return core::resource_exhausted("DeviceArena: scratch allocation of " + mib(size) + " does not fit: " +
                                    mib(available()) + " free of " + mib(capacity_) + " (persistent " +
                                    mib(persistent_end_) + ", scratch " + mib(scratch_used()) + ")");
  }
  scratch_begin_ -= size;  // stays aligned: capacity_ and size are multiples of kArenaAlignment
  scratch_peak_ = std::max(scratch_peak_, scratch_used());
  return static_cast<void*>(base_ + scratch_begin_);
}

void DeviceArena::reset_scratch() {
  scratch_begin_ = capacity_;
}

core::Expected<size_t> tensor_bytes(const core::Shape& shape, core::DType dtype) {
  for (int64_t d : shape) {
    if (d < 0) return core::invalid_argument("negative dim in shape " + core::shape_to_string(shape));
  }
  return core::element_bytes(dtype, static_cast<size_t>(core::shape_numel(shape)));
}

core::Expected<core::Tensor> DeviceArena::make_tensor(void* data, const core::Shape& shape,
                                                      core::DType dtype) {
  return core::Tensor::borrow(data, shape, dtype, core::Device::kCuda, block_);
}

core::Expected<core::Tensor> DeviceArena::tensor(const core::Shape& shape, core::DType dtype) {
  LOOM_ASSIGN_OR_RETURN(const size_t bytes, tensor_bytes(shape, dtype));
  LOOM_ASSIGN_OR_RETURN(void* p, allocate(bytes));
  return make_tensor(p, shape, dtype);
}

core::Expected<core::Tensor> DeviceArena::scratch_tensor(const core::Shape& shape, core::DType dtype) {
  LOOM_ASSIGN_OR_RETURN(const size_t bytes, tensor_bytes(shape, dtype));
  LOOM_ASSIGN_OR_RETURN(void* p, allocate_scratch(bytes));
  return make_tensor(p, shape, dtype);
}

// ---- copies -----------------------------------------------------------------------------------

core::Status copy_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return {};
  LOOM_CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
  return {};
}

core::Status copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return {};
  LOOM_CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
  return {};
}

core::Status copy_to_device_async(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return {};
  LOOM_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
  return {};
}

core::Status copy_to_host_async(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return {};
  LOOM_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
  return {};
}

core::Status copy_device_to_device_async(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return {};
  LOOM_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
  return {};
}

core::Status upload(const core::Tensor& host, core::Tensor& device) {
  LOOM_CHECK(host.device() == core::Device::kCpu && device.device() == core::Device::kCuda)
      << "upload wants a CPU source and a CUDA destination";
  LOOM_CHECK(host.dtype() == device.dtype() && host.numel() == device.numel())
      << "upload " << core::shape_to_string(host.shape()) << " " << core::dtype_name(host.dtype()) << " -> "
      << core::shape_to_string(device.shape()) << " " << core::dtype_name(device.dtype());
  return copy_to_device(device.data(), host.data(), host.nbytes());
}

core::Status download(const core::Tensor& device, core::Tensor& host) {
  LOOM_CHECK(device.device() == core::Device::kCuda && host.device() == core::Device::kCpu)
      << "download wants a CUDA source and a CPU destination";
  LOOM_CHECK(host.dtype() == device.dtype() && host.numel() == device.numel())
      << "download " << core::shape_to_string(device.shape()) << " " << core::dtype_name(device.dtype())
      << " -> " << core::shape_to_string(host.shape()) << " " << core::dtype_name(host.dtype());
  return copy_to_host(host.data(), device.data(), device.nbytes());
}

// ---- PinnedBuffer -----------------------------------------------------------------------------

core::Expected<PinnedBuffer> PinnedBuffer::create(size_t bytes) {
  PinnedBuffer b;
  if (bytes == 0) return b;
  const cudaError_t err = cudaHostAlloc(&b.data_, bytes, cudaHostAllocDefault);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    b.data_ = nullptr;
    return core::resource_exhausted("cudaHostAlloc of " + mib(bytes) + " failed: " + cudaGetErrorString(err));
  }
  b.size_ = bytes;
  return b;
}

PinnedBuffer::PinnedBuffer(PinnedBuffer&& o) noexcept : data_(o.data_), size_(o.size_) {
  o.data_ = nullptr;
  o.size_ = 0;
}

PinnedBuffer& PinnedBuffer::operator=(PinnedBuffer&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) (void)cudaFreeHost(data_);
    data_ = o.data_;
    size_ = o.size_;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) (void)cudaFreeHost(data_);
}

// ---- PinnedStaging ----------------------------------------------------------------------------

namespace {
constexpr size_t kStagingAlignment = 64;
}

core::Expected<std::unique_ptr<PinnedStaging>> PinnedStaging::create(size_t capacity) {
  if (capacity < kStagingAlignment) {
    return core::invalid_argument("PinnedStaging capacity " + std::to_string(capacity) + " is too small");
  }
  std::unique_ptr<PinnedStaging> s(new PinnedStaging());
  s->capacity_ = align_down(capacity, kStagingAlignment);
  void* p = nullptr;
  const cudaError_t err = cudaHostAlloc(&p, s->capacity_, cudaHostAllocDefault);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return core::resource_exhausted("cudaHostAlloc of " + mib(s->capacity_) +
                                    " failed: " + cudaGetErrorString(err));
  }
  s->ring_ = static_cast<char*>(p);
  return s;
}

PinnedStaging::~PinnedStaging() {
  for (const Segment& seg : segments_) {
    (void)cudaEventSynchronize(seg.done);
    (void)cudaEventDestroy(seg.done);
  }
  for (cudaEvent_t e : free_events_) (void)cudaEventDestroy(e);
  if (ring_ != nullptr) (void)cudaFreeHost(ring_);
}

core::Expected<cudaEvent_t> PinnedStaging::take_event() {
  if (!free_events_.empty()) {
    cudaEvent_t e = free_events_.back();
    free_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  LOOM_CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

core::Status PinnedStaging::retire_finished() {
  size_t out = 0;
  for (size_t i = 0; i < segments_.size(); ++i) {
    const cudaError_t q = cudaEventQuery(segments_[i].done);
    if (q == cudaSuccess) {
      free_events_.push_back(segments_[i].done);
      continue;
    }
    if (q != cudaErrorNotReady) LOOM_CUDA_TRY(q);
    segments_[out++] = segments_[i];
  }
  segments_.resize(out);
  return {};
}

core::Status PinnedStaging::synchronize() {
  for (const Segment& seg : segments_) LOOM_CUDA_TRY(cudaEventSynchronize(seg.done));
  return retire_finished();
}

core::Status PinnedStaging::upload(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return {};
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  LOOM_CUDA_TRY(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) {
    return core::invalid_argument("PinnedStaging::upload on a stream under graph capture");
  }
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  while (bytes > 0) {
    const size_t piece = std::min(bytes, capacity_);
    LOOM_RETURN_IF_ERROR(upload_piece(d, s, piece, stream));
    s += piece;
    d += piece;
    bytes -= piece;
  }
  return {};
}

core::Status PinnedStaging::upload_piece(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  size_t off = head_;
  if (off + bytes > capacity_) off = 0;
  const size_t end = off + bytes;
  // Any copy in flight that still reads [off, end) must finish before we overwrite it. The
  // segments are few (a handful per step), so a linear scan is fine.
  for (const Segment& seg : segments_) {
    if (seg.begin < end && off < seg.end) LOOM_CUDA_TRY(cudaEventSynchronize(seg.done));
  }
  LOOM_RETURN_IF_ERROR(retire_finished());
  std::memcpy(ring_ + off, src, bytes);
  LOOM_ASSIGN_OR_RETURN(cudaEvent_t done, take_event());
  cudaError_t err = cudaMemcpyAsync(dst, ring_ + off, bytes, cudaMemcpyHostToDevice, stream);
  if (err == cudaSuccess) err = cudaEventRecord(done, stream);
  if (err != cudaSuccess) {
    free_events_.push_back(done);
    return cuda_error_status(err, "PinnedStaging copy", __FILE__, __LINE__);
  }
  segments_.push_back({off, end, done});
  head_ = std::min(capacity_, align_up(end, kStagingAlignment));
  return {};
}

}  // namespace loom::backends::cuda
