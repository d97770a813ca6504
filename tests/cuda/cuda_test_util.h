// Helpers for the CUDA backend tests: skipping without a GPU, seeded random inputs, device
// buffers, NaN poisoning, and whole-tensor comparison (max abs, relative L2; NaN never passes).
//
// Every test draws a fresh seed from std::random_device and prints it on failure (SCOPED_TRACE);
// LOOM_TEST_SEED=<n> replays a run.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "core/dtype.h"

namespace loom::backends::cuda::testing {

using core::DType;

// Skips the test (with the runtime's reason) when no CUDA device is usable.
#define LOOM_REQUIRE_CUDA()                                                                        \
  do {                                                                                             \
    int loom_n_ = 0;                                                                               \
    const cudaError_t loom_e_ = cudaGetDeviceCount(&loom_n_);                                      \
    if (loom_e_ != cudaSuccess) GTEST_SKIP() << "no CUDA device: " << cudaGetErrorString(loom_e_); \
    if (loom_n_ == 0) GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount returned 0";             \
  } while (0)

// Fails the test when a CUDA call fails.
#define LOOM_ASSERT_CUDA(expr)                                                       \
  do {                                                                               \
    const cudaError_t loom_e_ = (expr);                                              \
    ASSERT_EQ(loom_e_, cudaSuccess) << #expr << ": " << cudaGetErrorString(loom_e_); \
  } while (0)
#define LOOM_ASSERT_OK(expr)                                             \
  do {                                                                   \
    const ::loom::core::Status loom_st_ = (expr);                        \
    ASSERT_TRUE(loom_st_.ok()) << #expr << ": " << loom_st_.to_string(); \
  } while (0)

inline uint64_t test_seed() {
  if (const char* s = std::getenv("LOOM_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  std::random_device rd;
  return (uint64_t{rd()} << 32) | rd();
}

#define LOOM_CUDA_SEEDED_RNG(rng)                                               \
  const uint64_t rng##_seed = ::loom::backends::cuda::testing::test_seed();     \
  SCOPED_TRACE("seed " + std::to_string(rng##_seed) +                           \
               " (replay: LOOM_TEST_SEED=" + std::to_string(rng##_seed) + ")"); \
  std::mt19937_64 rng(rng##_seed)

inline float uniform(std::mt19937_64& rng, float lo, float hi) {
  return std::uniform_real_distribution<float>(lo, hi)(rng);
}
inline int64_t uniform_int(std::mt19937_64& rng, int64_t lo, int64_t hi) {  // inclusive
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

// A device allocation owned by the test. Size 0 still allocates a few bytes.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    const cudaError_t e = cudaMalloc(&ptr_, bytes == 0 ? 16 : bytes);
    if (e != cudaSuccess) {
      ADD_FAILURE() << "cudaMalloc(" << bytes << "): " << cudaGetErrorString(e);
      ptr_ = nullptr;
    }
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

  // 0xff bytes: a NaN in f32, bf16 and f16 alike.
  void poison() const { EXPECT_EQ(cudaMemset(ptr_, 0xff, bytes_), cudaSuccess); }
  template <typename T>
  void upload(const std::vector<T>& host) const {
    if (host.empty()) return;
    ASSERT_LE(host.size() * sizeof(T), bytes_);
    ASSERT_EQ(cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  template <typename T>
  std::vector<T> download(size_t count) const {
    std::vector<T> host(count);
    if (count == 0) return host;
    EXPECT_LE(count * sizeof(T), bytes_);
    EXPECT_EQ(cudaMemcpy(host.data(), ptr_, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Host storage of a 16-bit float type.
inline uint16_t to_half_bits(float v, DType t) {
  return t == DType::kBF16 ? core::f32_to_bf16(v) : core::f32_to_f16(v);
}
inline float from_half_bits(uint16_t v, DType t) {
  return t == DType::kBF16 ? core::bf16_to_f32(v) : core::f16_to_f32(v);
}

// n uniform values in [lo, hi) rounded to t (bits) and their exact f32 values.
struct HalfData {
  std::vector<uint16_t> bits;
  std::vector<float> f32;
};
inline HalfData random_half(size_t n, DType t, std::mt19937_64& rng, float lo = -1.0f, float hi = 1.0f) {
  HalfData d;
  d.bits.resize(n);
  d.f32.resize(n);
  for (size_t i = 0; i < n; ++i) {
    d.bits[i] = to_half_bits(uniform(rng, lo, hi), t);
    d.f32[i] = from_half_bits(d.bits[i], t);
  }
  return d;
}

inline std::vector<float> upcast(const std::vector<uint16_t>& bits, DType t) {
  std::vector<float> out(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) out[i] = from_half_bits(bits[i], t);
  return out;
}

// One unit in the last place of the storage type, relative: bf16 has 8 significant bits,
// f16 11, f32 24.
inline double ulp_rel(DType t) {
  return t == DType::kBF16 ? std::ldexp(1.0, -7)
                           : (t == DType::kF16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -23));
}

struct Diff {
  double max_abs = 0;
  double rel_l2 = 0;
  int64_t nan = 0;
  int64_t worst = -1;
};

inline Diff compare(const std::vector<float>& got, const std::vector<double>& ref) {
  Diff d;
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) || std::isnan(ref[i])) {
      ++d.nan;
      continue;
    }
    const double e = std::abs(static_cast<double>(got[i]) - ref[i]);
    if (e > d.max_abs) d.max_abs = e, d.worst = static_cast<int64_t>(i);
    num += e * e;
    den += ref[i] * ref[i];
  }
  d.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return d;
}

inline std::string describe(const Diff& d) {
  return "max_abs " + std::to_string(d.max_abs) + " rel_l2 " + std::to_string(d.rel_l2) + " nan " +
         std::to_string(d.nan) + " worst index " + std::to_string(d.worst);
}

// Element-wise bound for outputs rounded once to `t` from an f32 computation of a double
// reference: |got - ref| <= ulps * ulp(t) * |ref| + abs_floor. Returns the first violating index
// or -1. NaN in got always violates.
inline int64_t first_violation(const std::vector<float>& got, const std::vector<double>& ref, DType t,
                               double ulps, double abs_floor) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i])) return static_cast<int64_t>(i);
    const double e = std::abs(static_cast<double>(got[i]) - ref[i]);
    if (e > ulps * ulp_rel(t) * std::abs(ref[i]) + abs_floor) return static_cast<int64_t>(i);
  }
  return -1;
}

// Passes when no element is NaN and every |got - ref| <= ulps * ulp(t) * |ref| + abs_floor;
// reports max abs, relative L2 and the first violation otherwise.
inline ::testing::AssertionResult close_to(const std::vector<float>& got, const std::vector<double>& ref,
                                           DType t, double ulps, double abs_floor) {
  if (got.size() != ref.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " vs reference " << ref.size();
  }
  const int64_t bad = first_violation(got, ref, t, ulps, abs_floor);
  if (bad < 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << describe(compare(got, ref)) << "; first violation at " << bad << ": got " << got[bad] << " ref "
         << ref[bad] << " (bound " << ulps << " ulp of " << core::dtype_name(t) << " + " << abs_floor << ")";
}

inline std::vector<double> to_double(const float* p, size_t n) {
  return std::vector<double>(p, p + n);
}

}  // namespace loom::backends::cuda::testing
