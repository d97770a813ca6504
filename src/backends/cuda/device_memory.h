// Device memory: one arena per process (a single cudaMalloc), host<->device copies, and pinned
// host buffers for small per-step uploads and downloads.
//
// DeviceArena layout (one block of `capacity()` bytes, 256-byte aligned pieces):
//
//   base ─► [ persistent (weights, KV caches) ─►      free      ◄─ scratch (activations) ] ◄─ end
//
// Persistent allocations grow up from the base and live as long as the arena; scratch allocations
// grow down from the end and are all released at once by reset_scratch() (once per forward pass).
// The two never overlap: an allocation that would cross the other side fails with
// ResourceExhausted naming the sizes. Typical use: load weights (persistent), run one worst-case
// forward pass on scratch, read scratch_peak(), reset_scratch(), then size the KV cache as
// available() minus that peak (what vLLM's profiling run does).
//
// Scratch addresses are deterministic: the same sequence of allocate_scratch() calls after
// reset_scratch() returns the same pointers, which is what CUDA graph replay needs.
//
// Tensors made by tensor()/scratch_tensor() are Device::kCuda views into the arena; they hold a
// reference to the underlying allocation, so the memory is freed only when the arena and every
// such tensor are gone (but a scratch tensor's contents are garbage after reset_scratch()).
// Not thread-safe: one arena is driven by one host thread.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace loom::backends::cuda {

inline constexpr size_t kArenaAlignment = 256;

class DeviceArena {
 public:
  // Reserves `fraction * total - (total - free)` bytes of the current device, rounded down to
  // 2 MiB: the `--gpu-memory-utilization` budget of vLLM, i.e. the process may use `fraction` of
  // the card's total memory, and what is already in use (this process's CUDA context, cuBLAS
  // workspaces, other processes) counts against it. So create the arena last, after handles and
  // workspaces. fraction must be in (0, 1]. ResourceExhausted when nothing would be left.
  static core::Expected<std::unique_ptr<DeviceArena>> create_fraction(double fraction);
  // Reserves exactly `bytes` (rounded up to kArenaAlignment).
  static core::Expected<std::unique_ptr<DeviceArena>> create(size_t bytes);

  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena() = default;

  // A long-lived allocation (weights, KV caches) of `bytes` (may be 0), 256-byte aligned.
  core::Expected<void*> allocate(size_t bytes);
  // A per-forward allocation, valid until the next reset_scratch().
  core::Expected<void*> allocate_scratch(size_t bytes);
  // Releases every scratch allocation (the contents are not touched).
  void reset_scratch();

  // Uninitialised device tensors of `shape` x `dtype` in the persistent / scratch region.
  core::Expected<core::Tensor> tensor(const core::Shape& shape, core::DType dtype);
  core::Expected<core::Tensor> scratch_tensor(const core::Shape& shape, core::DType dtype);

  void* base() const { return base_; }
  size_t capacity() const { return capacity_; }
  size_t persistent_used() const { return persistent_end_; }
  size_t scratch_used() const { return capacity_ - scratch_begin_; }
  // Largest scratch_used() since creation (or since reset_scratch_peak()).
  size_t scratch_peak() const { return scratch_peak_; }
  void reset_scratch_peak() { scratch_peak_ = scratch_used(); }
  // Bytes between the persistent and scratch regions.
  size_t available() const { return scratch_begin_ - persistent_end_; }

 private:
  DeviceArena(std::shared_ptr<void> block, size_t capacity);
  core::Expected<core::Tensor> make_tensor(void* data, const core::Shape& shape, core::DType dtype);

  std::shared_ptr<void> block_;  // the cudaMalloc'ed memory; cudaFree when the last user goes
  char* base_ = nullptr;
  size_t capacity_ = 0;
  size_t persistent_end_ = 0;  // offset of the first free byte above the persistent region
  size_t scratch_begin_ = 0;   // offset of the lowest scratch byte (== capacity_ when empty)
  size_t scratch_peak_ = 0;
};

// Bytes of a tensor of `shape` x `dtype`; InvalidArgument for a negative dim.
core::Expected<size_t> tensor_bytes(const core::Shape& shape, core::DType dtype);

// Copies. The synchronous ones return when the copy is done. The async ones are ordered on
// `stream`; from pageable host memory the runtime stages them (and may block), from pinned memory
// (PinnedBuffer) they are truly asynchronous and the host memory must stay untouched until the
// stream reaches them. bytes == 0 is a no-op.
core::Status copy_to_device(void* dst, const void* src, size_t bytes);
core::Status copy_to_host(void* dst, const void* src, size_t bytes);
core::Status copy_to_device_async(void* dst, const void* src, size_t bytes, cudaStream_t stream);
core::Status copy_to_host_async(void* dst, const void* src, size_t bytes, cudaStream_t stream);
core::Status copy_device_to_device_async(void* dst, const void* src, size_t bytes, cudaStream_t stream);

// Tensor copies (synchronous): same dtype and element count (LOOM_CHECK), host is kCpu, device is
// kCuda.
core::Status upload(const core::Tensor& host, core::Tensor& device);
core::Status download(const core::Tensor& device, core::Tensor& host);

// Page-locked host memory (cudaHostAlloc): the target of async downloads (sampled tokens,
// logprobs) and the source of truly async uploads.
class PinnedBuffer {
 public:
  static core::Expected<PinnedBuffer> create(size_t bytes);
  PinnedBuffer() = default;
  PinnedBuffer(PinnedBuffer&& o) noexcept;
  PinnedBuffer& operator=(PinnedBuffer&& o) noexcept;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer();

  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// A ring of pinned host memory for many small uploads (token ids, positions, slot mappings, block
// tables, sampling parameters) without a host sync per copy: upload() copies the caller's bytes
// into the ring and enqueues an async copy from there, so the caller's buffer can be reused at
// once. A ring region is reused only after the copy that read it has completed (an event per
// upload; the host waits only when the ring wraps onto a copy still in flight). Uploads larger
// than the ring are split into ring-sized pieces.
// Not for use while `stream` is being captured into a CUDA graph (a replay would re-read the ring,
// which has moved on): InvalidArgument then. Upload into fixed device buffers before the replay.
class PinnedStaging {
 public:
  static core::Expected<std::unique_ptr<PinnedStaging>> create(size_t capacity = size_t{4} << 20);
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;
  ~PinnedStaging();  // waits for the copies in flight

  core::Status upload(void* dst, const void* src, size_t bytes, cudaStream_t stream);
  // Waits for every upload in flight.
  core::Status synchronize();
  size_t capacity() const { return capacity_; }
  size_t in_flight() const { return segments_.size(); }

 private:
  struct Segment {
    size_t begin = 0, end = 0;
    cudaEvent_t done = nullptr;
  };
  PinnedStaging() = default;
  core::Status upload_piece(void* dst, const void* src, size_t bytes, cudaStream_t stream);
  core::Status retire_finished();
  core::Expected<cudaEvent_t> take_event();

  char* ring_ = nullptr;
  size_t capacity_ = 0;
  size_t head_ = 0;
  std::vector<Segment> segments_;  // in flight, oldest first
  std::vector<cudaEvent_t> free_events_;
};

}  // namespace loom::backends::cuda
