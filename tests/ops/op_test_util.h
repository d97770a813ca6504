// Helpers for op tests: seeded random tensors, NaN poisoning, whole-tensor comparison.
//
// Every test draws a fresh seed from std::random_device and prints it on failure (via
// SCOPED_TRACE); set LOOM_TEST_SEED=<n> to replay a failing run.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>

#include "core/dtype.h"
#include "core/tensor.h"

namespace loom::ops::testing {

using core::DType;
using core::Tensor;

inline uint64_t test_seed() {
  if (const char* s = std::getenv("LOOM_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  std::random_device rd;
  return (uint64_t{rd()} << 32) | rd();
}

// A seeded generator whose seed is attached to every failure in the enclosing scope.
#define LOOM_SEEDED_RNG(rng)                                                    \
  const uint64_t rng##_seed = ::loom::ops::testing::test_seed();                \
  SCOPED_TRACE("seed " + std::to_string(rng##_seed) +                           \
               " (replay: LOOM_TEST_SEED=" + std::to_string(rng##_seed) + ")"); \
  std::mt19937_64 rng(rng##_seed)

inline float uniform(std::mt19937_64& rng, float lo, float hi) {
  return std::uniform_real_distribution<float>(lo, hi)(rng);
}

inline int64_t uniform_int(std::mt19937_64& rng, int64_t lo, int64_t hi) {  // inclusive
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

// Stores v into element i of a f32/bf16/f16 tensor (rounded to nearest even).
inline void set_elem(Tensor& t, int64_t i, float v) {
  switch (t.dtype()) {
    case DType::kF32: t.data_as<float>()[i] = v; return;
    case DType::kBF16: t.data_as<uint16_t>()[i] = core::f32_to_bf16(v); return;
    case DType::kF16: t.data_as<uint16_t>()[i] = core::f32_to_f16(v); return;
    default: FAIL() << "set_elem: unsupported dtype";
  }
}

// Uniform [lo, hi) values, rounded to the tensor's dtype.
inline Tensor random_tensor(core::Shape shape, DType dtype, std::mt19937_64& rng, float lo = -1.0f,
                            float hi = 1.0f) {
  Tensor t = Tensor::empty(std::move(shape), dtype);
  for (int64_t i = 0; i < t.numel(); ++i) set_elem(t, i, uniform(rng, lo, hi));
  return t;
}

inline void fill(Tensor& t, float v) {
  for (int64_t i = 0; i < t.numel(); ++i) set_elem(t, i, v);
}

inline void poison(Tensor& t) {
  fill(t, std::numeric_limits<float>::quiet_NaN());
}

inline Tensor clone(const Tensor& t) {
  Tensor c = Tensor::empty(t.shape(), t.dtype());
  std::memcpy(c.data(), t.data(), t.nbytes());
  return c;
}

struct Diff {
  double max_abs = 0;      // max |got - ref|
  double rel_l2 = 0;       // ||got - ref|| / ||ref||
  double worst_ratio = 0;  // max |got - ref| / (atol + rtol |ref|); <= 1 passes
  int64_t worst_index = -1;
  int64_t nan_count = 0;  // NaN/inf in got or ref: never passes
};

inline Diff diff(const Tensor& got, const Tensor& ref, double atol, double rtol) {
  Diff d;
  const Tensor g = got.to_f32(), r = ref.to_f32();
  double num = 0, den = 0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double a = g.data_as<float>()[i], b = r.data_as<float>()[i];
    if (!std::isfinite(a) || !std::isfinite(b)) {
      if (d.nan_count++ == 0) d.worst_index = i;
      continue;
    }
    const double e = std::fabs(a - b);
    num += e * e;
    den += b * b;
    d.max_abs = std::max(d.max_abs, e);
    const double ratio = e / (atol + rtol * std::fabs(b));
    if (ratio > d.worst_ratio && d.nan_count == 0) {
      d.worst_ratio = ratio;
      d.worst_index = i;
    }
  }
  d.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return d;
}

// Passes when shapes match, nothing is NaN/inf, and every element is within
// atol + rtol * |ref|. Reports max abs and relative L2 error either way on failure.
inline ::testing::AssertionResult all_close(const Tensor& got, const Tensor& ref, double atol, double rtol) {
  if (got.shape() != ref.shape())
    return ::testing::AssertionFailure() << "shape " << core::shape_to_string(got.shape()) << " vs reference "
                                         << core::shape_to_string(ref.shape());
  const Diff d = diff(got, ref, atol, rtol);
  if (d.nan_count == 0 && d.worst_ratio <= 1.0) return ::testing::AssertionSuccess();
  std::ostringstream os;
  os << "max_abs " << d.max_abs << " rel_l2 " << d.rel_l2 << " worst error/tolerance " << d.worst_ratio
     << " at flat index " << d.worst_index << " (got " << got.to_f32().data_as<float>()[d.worst_index]
     << " ref " << ref.to_f32().data_as<float>()[d.worst_index] << ", atol " << atol << " rtol " << rtol
     << "), non-finite " << d.nan_count;
  return ::testing::AssertionFailure() << os.str();
}

// Bitwise equality (for ops that only move or exactly convert data).
inline ::testing::AssertionResult bit_equal(const Tensor& got, const Tensor& ref) {
  if (got.shape() != ref.shape() || got.dtype() != ref.dtype())
    return ::testing::AssertionFailure() << "shape/dtype mismatch";
  if (std::memcmp(got.data(), ref.data(), got.nbytes()) != 0) {
    const Diff d = diff(got, ref, 0, 0);
    return ::testing::AssertionFailure() << "not bit-equal: max_abs " << d.max_abs << " at " << d.worst_index
                                         << ", non-finite " << d.nan_count;
  }
  const Diff d = diff(got, ref, 0, 0);
  if (d.nan_count != 0) return ::testing::AssertionFailure() << d.nan_count << " non-finite values";
  return ::testing::AssertionSuccess();
}

}  // namespace loom::ops::testing
