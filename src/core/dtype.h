// Element types and scalar conversions. bf16/f16 are stored as raw uint16_t bits.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace loom::core {

enum class DType : uint8_t {
  kF32,
  kF16,
  kBF16,
  kF8E4M3,
  kF8E5M2,
  kI8,
  kU8,
  kI16,
  kI32,
  kI64,
  kBool,
  kI4Packed,  // two signed 4-bit values per byte, low nibble first
};

// Bytes per element; kI4Packed reports 1 (per pair) and callers use element_bytes().
size_t dtype_size(DType t);
// Bytes needed for n elements (handles packed int4).
size_t element_bytes(DType t, size_t n);
std::string_view dtype_name(DType t);
// Parses safetensors / CLI spellings: "F32", "f32", "BF16", "bf16", "float32", ...
bool parse_dtype(std::string_view s, DType* out);

inline float bf16_to_f32(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round-to-nearest-even, NaN preserved (what torch does for .to(torch.bfloat16)).
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float f16_to_f32(uint16_t v);
uint16_t f32_to_f16(float f);

// Converts n elements of type `src_type` at `src` to f32 at `dst`. Supports f32/f16/bf16.
void convert_to_f32(const void* src, DType src_type, float* dst, size_t n);
// Converts n f32 values at `src` to `dst_type` at `dst` (RNE, as torch's .to(dtype)). Supports
// f32/f16/bf16.
void convert_from_f32(const float* src, DType dst_type, void* dst, size_t n);

}  // namespace loom::core
