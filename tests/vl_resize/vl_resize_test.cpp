// resize_bicubic_aa_u8: the SIMD kernels (AVX2 when the CPU has it) and the thread split against the
// portable scalar path, which is the reference re-implementation of torch's uint8 antialiased bicubic
// (its agreement with transformers is checked on the goldens of tests/vl_processor,
// tests/vl_video_processor and tests/q3vl_processor). Integer arithmetic: the bytes must be equal.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "models/qwen_vl/resize.h"

namespace qv = loom::models::qwen_vl;

namespace {

struct Case {
  int in_w, in_h, channels, out_w, out_h;
};

// Random bytes, or (one case in three) only 0/255, which drives the sums to the clamp limits.
std::vector<uint8_t> random_image(std::mt19937& rng, const Case& c) {
  std::vector<uint8_t> img(static_cast<size_t>(c.in_w) * c.in_h * c.channels);
  const bool extremes = rng() % 3 == 0;
  for (auto& v : img) v = extremes ? static_cast<uint8_t>((rng() & 1) * 255) : static_cast<uint8_t>(rng());
  return img;
}

void expect_paths_agree(std::mt19937& rng, const Case& c, int threads, uint32_t seed) {
  const std::vector<uint8_t> img = random_image(rng, c);
  const size_t n = static_cast<size_t>(c.out_w) * c.out_h * c.channels;
  // Poisoned: every byte must be written. `fast` has guard bytes past the image, which no store
  // may touch (a row's ragged end must not spill into the next row, maybe another thread's).
  constexpr size_t kGuard = 64;
  std::vector<uint8_t> ref(n, 0xAB), fast(n + kGuard, 0x5C);
  qv::resize_bicubic_aa_u8_into(img.data(), c.in_w, c.in_h, c.channels, c.out_w, c.out_h, ref.data(), 1,
                                /*allow_simd=*/false);
  qv::resize_bicubic_aa_u8_into(img.data(), c.in_w, c.in_h, c.channels, c.out_w, c.out_h, fast.data(),
                                threads,
                                /*allow_simd=*/true);
  const std::vector<uint8_t> vec =
      qv::resize_bicubic_aa_u8(img.data(), c.in_w, c.in_h, c.channels, c.out_w, c.out_h, threads);
  size_t bad = 0, first = n;
  for (size_t i = 0; i < n; ++i)
    if (ref[i] != fast[i] || ref[i] != vec[i]) {
      ++bad;
      if (first == n) first = i;
    }
  for (size_t i = n; i < n + kGuard; ++i)
    ASSERT_EQ(fast[i], 0x5C) << c.in_w << "x" << c.in_h << "x" << c.channels << " -> " << c.out_w << "x"
                             << c.out_h << ": wrote " << i - n << " bytes past the image";
  EXPECT_EQ(bad, 0u) << c.in_w << "x" << c.in_h << "x" << c.channels << " -> " << c.out_w << "x" << c.out_h
                     << " threads " << threads << " seed " << seed << ": first mismatch at byte " << first;
}

TEST(VlResize, SimdAndThreadsMatchScalarOnGrid) {
  const uint32_t seed = std::random_device{}();
  std::mt19937 rng(seed);
  // Odd sizes; up- and downscaling in each direction, one side unchanged, extreme ratios (many taps).
  const int sides[] = {1, 2, 7, 13, 31, 97, 250};
  for (int channels = 1; channels <= 4; ++channels)
    for (int in_w : sides)
      for (int out_w : sides) {
        const int in_h = sides[rng() % 7], out_h = rng() % 4 == 0 ? in_h : sides[rng() % 7];
        expect_paths_agree(rng, {in_w, in_h, channels, out_w, out_h}, 1 + static_cast<int>(rng() % 4), seed);
      }
}

TEST(VlResize, SimdAndThreadsMatchScalarOnProcessorSizes) {
  const uint32_t seed = std::random_device{}();
  std::mt19937 rng(seed);
  // Qwen2.5-VL defaults for a 1920x1080 image, a 720p video frame, a 4:3 photo downscale, and
  // one-sided resizes (the other pass skipped).
  const Case cases[] = {{1920, 1080, 3, 1932, 1092}, {1280, 720, 3, 1008, 560}, {1601, 1203, 3, 812, 588},
                        {1001, 333, 3, 1001, 364},   {333, 1001, 3, 364, 1001}, {641, 479, 4, 1288, 977}};
  for (const Case& c : cases)
    for (int threads : {1, 2, 3}) expect_paths_agree(rng, c, threads, seed);
}

TEST(VlResize, RandomSizes) {
  const uint32_t seed = std::random_device{}();
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> side(1, 120), channels(1, 4), threads(1, 4);
  for (int i = 0; i < 300; ++i)
    expect_paths_agree(rng, {side(rng), side(rng), channels(rng), side(rng), side(rng)}, threads(rng), seed);
}

}  // namespace
