#include "core/dtype.h"

#include <cmath>

#include "core/check.h"

namespace loom::core {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
    case DType::kF8E4M3: return 1;
    case DType::kF8E5M2: return 1;
    case DType::kI8: return 1;
    case DType::kU8: return 1;
    case DType::kI16: return 2;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kBool: return 1;
    case DType::kI4Packed: return 1;
  }
  return 0;
}

size_t element_bytes(DType t, size_t n) {
  if (t == DType::kI4Packed) return (n + 1) / 2;
  return dtype_size(t) * n;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kF8E4M3: return "f8_e4m3";
    case DType::kF8E5M2: return "f8_e5m2";
    case DType::kI8: return "i8";
    case DType::kU8: return "u8";
    case DType::kI16: return "i16";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kBool: return "bool";
    case DType::kI4Packed: return "i4";
  }
  return "?";
}

bool parse_dtype(std::string_view s, DType* out) {
  struct Entry {
    std::string_view name;
    DType type;
  };
  static constexpr Entry kTable[] = {
      {"F32", DType::kF32},        {"f32", DType::kF32},        {"float32", DType::kF32},
      {"F16", DType::kF16},        {"f16", DType::kF16},        {"float16", DType::kF16},
      {"BF16", DType::kBF16},      {"bf16", DType::kBF16},      {"bfloat16", DType::kBF16},
      {"F8_E4M3", DType::kF8E4M3}, {"F8_E5M2", DType::kF8E5M2}, {"I8", DType::kI8},
      {"U8", DType::kU8},          {"I16", DType::kI16},        {"I32", DType::kI32},
      {"I64", DType::kI64},        {"BOOL", DType::kBool},
  };
  for (const auto& e : kTable) {
    if (e.name == s) {
      *out = e.type;
      return true;
    }
  }
  return false;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absx < 0x38800000u) {                                               // subnormal or zero in f16
    // value = absx as float; f16 subnormal unit is 2^-24.
    float a;
    std::memcpy(&a, &absx, sizeof a);
    float scaled = a * 16777216.0f;                          // 2^24, exact
    auto m = static_cast<uint32_t>(std::nearbyint(scaled));  // RNE under default rounding
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t exp = ((absx >> 23) - 127 + 15);
  uint32_t mant = absx & 0x7fffffu;
  uint32_t half = (exp << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

void convert_to_f32(const void* src, DType src_type, float* dst, size_t n) {
  switch (src_type) {
    case DType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
    case DType::kBF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::kF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    default: LOOM_CHECK(false) << "convert_to_f32: unsupported dtype " << dtype_name(src_type);
  }
}

void convert_from_f32(const float* src, DType dst_type, void* dst, size_t n) {
  switch (dst_type) {
    case DType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
    case DType::kBF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::kF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      return;
    }
    default: LOOM_CHECK(false) << "convert_from_f32: unsupported dtype " << dtype_name(dst_type);
  }
}

}  // namespace loom::core
