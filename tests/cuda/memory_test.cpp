// DeviceArena, copies, pinned staging, device_info.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "backends/cuda/device_memory.h"
#include "cuda_test_util.h"

namespace loom::backends::cuda {
namespace {

using core::DType;
using testing::DeviceBuffer;

constexpr size_t kMiB = size_t{1} << 20;

TEST(CudaDevice, InfoIsSane) {
  LOOM_REQUIRE_CUDA();
  auto info = device_info();
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_FALSE(info->name.empty());
  EXPECT_GE(info->cc_major, 7);
  EXPECT_GT(info->sm_count, 0);
  EXPECT_GT(info->total_memory, size_t{1} << 30);
  EXPECT_LE(info->free_memory, info->total_memory);
  EXPECT_GE(info->max_threads_per_block, 1024);
  std::printf("device: %s\n", to_string(*info).c_str());
}

TEST(CudaArena, PersistentAndScratchRegions) {
  LOOM_REQUIRE_CUDA();
  auto arena_or = DeviceArena::create(64 * kMiB + 100);
  ASSERT_TRUE(arena_or.ok()) << arena_or.status().to_string();
  DeviceArena& arena = **arena_or;
  EXPECT_EQ(arena.capacity() % kArenaAlignment, 0u);
  EXPECT_GE(arena.capacity(), 64 * kMiB + 100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(arena.base()) % kArenaAlignment, 0u);

  auto a = arena.allocate(1);
  auto b = arena.allocate(1000);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, arena.base());
  EXPECT_EQ(static_cast<char*>(*b) - static_cast<char*>(*a), 256);
  EXPECT_EQ(arena.persistent_used(), 256u + 1024u);

  auto s1 = arena.allocate_scratch(3000);
  auto s2 = arena.allocate_scratch(10);
  ASSERT_TRUE(s1.ok() && s2.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*s1) % kArenaAlignment, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*s2) % kArenaAlignment, 0u);
  EXPECT_EQ(static_cast<char*>(*s1) + 3072, static_cast<char*>(arena.base()) + arena.capacity());
  EXPECT_EQ(static_cast<char*>(*s2) + 256, static_cast<char*>(*s1));
  EXPECT_EQ(arena.scratch_used(), 3072u + 256u);
  EXPECT_EQ(arena.available(), arena.capacity() - arena.persistent_used() - arena.scratch_used());

  // Deterministic scratch addresses after a reset (what graph replay relies on).
  arena.reset_scratch();
  EXPECT_EQ(arena.scratch_used(), 0u);
  EXPECT_EQ(arena.scratch_peak(), 3072u + 256u);
  auto t1 = arena.allocate_scratch(3000);
  auto t2 = arena.allocate_scratch(10);
  ASSERT_TRUE(t1.ok() && t2.ok());
  EXPECT_EQ(*t1, *s1);
  EXPECT_EQ(*t2, *s2);

  // The regions never cross.
  auto too_big = arena.allocate(arena.available() + 1);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), core::StatusCode::kResourceExhausted);
  EXPECT_NE(too_big.status().message().find("does not fit"), std::string::npos) << too_big.status().message();
  auto too_big_scratch = arena.allocate_scratch(arena.available() + 1);
  ASSERT_FALSE(too_big_scratch.ok());
  EXPECT_EQ(too_big_scratch.status().code(), core::StatusCode::kResourceExhausted);
  auto rest = arena.allocate(arena.available());
  ASSERT_TRUE(rest.ok()) << rest.status().to_string();
  EXPECT_EQ(arena.available(), 0u);
  EXPECT_FALSE(arena.allocate_scratch(1).ok());

  // The memory is real and writable end to end.
  LOOM_ASSERT_CUDA(cudaMemset(arena.base(), 0x5a, arena.capacity()));
  LOOM_ASSERT_CUDA(cudaDeviceSynchronize());
}

TEST(CudaArena, TensorsPointIntoTheArenaAndKeepItAlive) {
  LOOM_REQUIRE_CUDA();
  LOOM_CUDA_SEEDED_RNG(rng);
  core::Tensor keep;
  std::vector<float> host(7 * 13);
  for (float& v : host) v = testing::uniform(rng, -5, 5);
  {
    auto arena = DeviceArena::create(8 * kMiB);
    ASSERT_TRUE(arena.ok());
    auto t = (*arena)->tensor({7, 13}, core::DType::kF32);
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    EXPECT_EQ(t->device(), core::Device::kCuda);
    EXPECT_EQ(t->shape(), (core::Shape{7, 13}));
    EXPECT_EQ(t->data(), (*arena)->base());
    auto s = (*arena)->scratch_tensor({3, 5}, core::DType::kBF16);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(static_cast<char*>(s->data()) + 256,
              static_cast<char*>((*arena)->base()) + (*arena)->capacity());
    EXPECT_FALSE((*arena)->tensor({-1, 3}, core::DType::kF32).ok());
    core::Tensor src = core::Tensor::empty({7, 13}, core::DType::kF32);
    std::memcpy(src.data(), host.data(), host.size() * sizeof(float));
    LOOM_ASSERT_OK(upload(src, *t));
    keep = *t;
  }  // the arena is gone; `keep` still owns the allocation
  core::Tensor back = core::Tensor::empty({7, 13}, core::DType::kF32);
  std::memset(back.data(), 0xff, back.nbytes());
  LOOM_ASSERT_OK(download(keep, back));
  EXPECT_EQ(std::memcmp(back.data(), host.data(), back.nbytes()), 0);
}

TEST(CudaArena, FractionOfTotalMemory) {
  LOOM_REQUIRE_CUDA();
  EXPECT_EQ(DeviceArena::create_fraction(0.0).status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_EQ(DeviceArena::create_fraction(1.5).status().code(), core::StatusCode::kInvalidArgument);
  size_t free_before = 0, total = 0;
  LOOM_ASSERT_CUDA(cudaMemGetInfo(&free_before, &total));
  const size_t used = total - free_before;
  // A budget that surely fits: what is used now plus 1 GiB (or all of the card).
  const double fraction =
      std::min(1.0, static_cast<double>(used + (size_t{1} << 30)) / static_cast<double>(total));
  auto arena = DeviceArena::create_fraction(fraction);
  ASSERT_TRUE(arena.ok()) << arena.status().to_string();
  const size_t budget = static_cast<size_t>(fraction * static_cast<double>(total));
  EXPECT_LE((*arena)->capacity(), budget - used);
  EXPECT_GT((*arena)->capacity(), budget - used - 4 * kMiB);  // rounded down to 2 MiB only
  EXPECT_EQ((*arena)->capacity() % (2 * kMiB), 0u);
  // A budget below what is already used cannot be met.
  const double tiny = static_cast<double>(used / 2) / static_cast<double>(total);
  if (tiny > 0.0) {
    auto none = DeviceArena::create_fraction(tiny);
    ASSERT_FALSE(none.ok());
    EXPECT_EQ(none.status().code(), core::StatusCode::kResourceExhausted);
  }
}

TEST(CudaArena, HugeRequestIsResourceExhausted) {
  LOOM_REQUIRE_CUDA();
  auto arena = DeviceArena::create(size_t{1} << 50);  // 1 PiB
  ASSERT_FALSE(arena.ok());
  EXPECT_EQ(arena.status().code(), core::StatusCode::kResourceExhausted);
  // The failure is not sticky: the device still works.
  DeviceBuffer b(1024);
  LOOM_ASSERT_CUDA(cudaMemset(b.get(), 0, 1024));
  LOOM_ASSERT_CUDA(cudaDeviceSynchronize());
}

TEST(CudaCopies, SyncAndAsyncRoundTrips) {
  LOOM_REQUIRE_CUDA();
  LOOM_CUDA_SEEDED_RNG(rng);
  for (size_t n : {size_t{1}, size_t{7}, size_t{4096}, size_t{1000003}}) {
    std::vector<uint8_t> src(n), back(n, 0);
    for (uint8_t& v : src) v = static_cast<uint8_t>(rng());
    DeviceBuffer a(n), b(n);
    a.poison();
    b.poison();
    LOOM_ASSERT_OK(copy_to_device(a.get(), src.data(), n));
    cudaStream_t stream = nullptr;
    LOOM_ASSERT_CUDA(cudaStreamCreate(&stream));
    LOOM_ASSERT_OK(copy_device_to_device_async(b.get(), a.get(), n, stream));
    auto pinned = PinnedBuffer::create(n);
    ASSERT_TRUE(pinned.ok());
    std::memset(pinned->data(), 0, n);
    LOOM_ASSERT_OK(copy_to_host_async(pinned->data(), b.get(), n, stream));
    LOOM_ASSERT_CUDA(cudaStreamSynchronize(stream));
    EXPECT_EQ(std::memcmp(pinned->data(), src.data(), n), 0) << n;
    LOOM_ASSERT_OK(copy_to_host(back.data(), a.get(), n));
    EXPECT_EQ(back, src);
    LOOM_ASSERT_CUDA(cudaStreamDestroy(stream));
  }
  LOOM_ASSERT_OK(copy_to_device(nullptr, nullptr, 0));  // empty copies are no-ops
}

// Many uploads of random sizes through a small ring: wrap-arounds, pieces larger than the ring,
// and reuse of the source buffer right after each call. Every destination must hold its bytes.
TEST(CudaPinnedStaging, ManyUploadsThroughASmallRing) {
  LOOM_REQUIRE_CUDA();
  LOOM_CUDA_SEEDED_RNG(rng);
  auto staging = PinnedStaging::create(4096);
  ASSERT_TRUE(staging.ok()) << staging.status().to_string();
  cudaStream_t stream = nullptr;
  LOOM_ASSERT_CUDA(cudaStreamCreate(&stream));
  constexpr int kUploads = 300;
  std::vector<size_t> sizes(kUploads), offsets(kUploads);
  size_t total = 0;
  for (int i = 0; i < kUploads; ++i) {
    const int kind = static_cast<int>(testing::uniform_int(rng, 0, 9));
    sizes[i] = kind == 0 ? static_cast<size_t>(testing::uniform_int(rng, 4097, 20000))  // > ring
                         : static_cast<size_t>(testing::uniform_int(rng, 1, 1500));
    offsets[i] = total;
    total += sizes[i];
  }
  std::vector<uint8_t> expect(total);
  for (uint8_t& v : expect) v = static_cast<uint8_t>(rng());
  DeviceBuffer dst(total);
  dst.poison();
  std::vector<uint8_t> scratch;
  for (int i = 0; i < kUploads; ++i) {
    scratch.assign(expect.begin() + offsets[i], expect.begin() + offsets[i] + sizes[i]);
    LOOM_ASSERT_OK((*staging)->upload(dst.as<uint8_t>() + offsets[i], scratch.data(), sizes[i], stream));
    std::fill(scratch.begin(), scratch.end(), 0);  // the caller's buffer is free at once
  }
  LOOM_ASSERT_OK((*staging)->synchronize());
  EXPECT_EQ((*staging)->in_flight(), 0u);
  EXPECT_EQ(dst.download<uint8_t>(total), expect);
  LOOM_ASSERT_CUDA(cudaStreamDestroy(stream));
}

TEST(CudaPinnedStaging, RefusesGraphCapture) {
  LOOM_REQUIRE_CUDA();
  auto staging = PinnedStaging::create(4096);
  ASSERT_TRUE(staging.ok());
  cudaStream_t stream = nullptr;
  LOOM_ASSERT_CUDA(cudaStreamCreate(&stream));
  DeviceBuffer dst(64);
  uint8_t src[64] = {};
  LOOM_ASSERT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const core::Status st = (*staging)->upload(dst.get(), src, sizeof src, stream);
  cudaGraph_t graph = nullptr;
  LOOM_ASSERT_CUDA(cudaStreamEndCapture(stream, &graph));
  if (graph != nullptr) cudaGraphDestroy(graph);
  EXPECT_EQ(st.code(), core::StatusCode::kInvalidArgument) << st.to_string();
  LOOM_ASSERT_CUDA(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace loom::backends::cuda
