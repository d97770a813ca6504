// cuda_gemv_bench: decode-shape linear layers, cuBLASLt (Gemm::run) against the GEMV kernel
// (gemv.h), as achieved weight bandwidth. Not a test: prints a table; run it on the GPU machine.
//
//   cuda_gemv_bench [--reps N] [--peak-gbs G]
//
// Shapes: Qwen2.5-7B decode at M = 1, 4, 8: q/o (3584, 3584), k/v (512, 3584), gate_up
// (37888, 3584), down (3584, 18944), lm_head (152064, 3584, f32 logits). bf16 weights and x.
// Each rep reads a different copy of the weights, rotating over >= 256 MB of copies, so nothing is
// served from the 50 MB L2 (a memset flush would leave dirty L2 lines to be written back inside
// the timed kernel). Each rep is bracketed by its own cudaEvents; the table shows the median of
// --reps (default 50) after 5 warm-up runs. Bytes = weights + x + y, each once; the fraction is of
// --peak-gbs (default 4230 GB/s, the H200's measured device copy bandwidth).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/gemm.h"
#include "backends/cuda/gemv.h"
#include "core/dtype.h"

namespace {

using loom::backends::cuda::Gemm;
using loom::backends::cuda::GemmArgs;
using loom::core::DType;

#define BENCH_CUDA(expr)                                                                         \
  do {                                                                                           \
    const cudaError_t e_ = (expr);                                                               \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

void must(const loom::core::Status& st, const char* what) {
  if (!st.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, st.to_string().c_str());
    std::exit(1);
  }
}

struct Shape {
  const char* name;
  int64_t n, k;
  DType out;
};

float to_float(const std::vector<uint8_t>& raw, size_t i, DType t) {
  if (t == DType::kF32) {
    float v;
    std::memcpy(&v, raw.data() + i * 4, 4);
    return v;
  }
  uint16_t b;
  std::memcpy(&b, raw.data() + i * 2, 2);
  return loom::core::bf16_to_f32(b);
}

// Median time in microseconds of `reps` runs of fn(rep), each between its own events.
template <typename Fn>
double time_us(cudaStream_t stream, int reps, Fn&& fn) {
  for (int i = 0; i < 5; ++i) fn(i);
  std::vector<cudaEvent_t> ev(2 * static_cast<size_t>(reps));
  for (auto& e : ev) BENCH_CUDA(cudaEventCreate(&e));
  for (int r = 0; r < reps; ++r) {
    BENCH_CUDA(cudaEventRecord(ev[2 * r], stream));
    fn(r);
    BENCH_CUDA(cudaEventRecord(ev[2 * r + 1], stream));
  }
  BENCH_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> t(static_cast<size_t>(reps));
  for (int r = 0; r < reps; ++r) {
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, ev[2 * r], ev[2 * r + 1]));
    t[r] = ms * 1e3;
  }
  for (auto& e : ev) cudaEventDestroy(e);
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 50;
  double peak = 4230.0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--peak-gbs" && i + 1 < argc) {
      peak = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--reps N] [--peak-gbs G]\n", argv[0]);
      return 2;
    }
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "no CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device: %s, %d SMs, L2 %d MB, %d reps, median\n", prop.name, prop.multiProcessorCount,
              prop.l2CacheSize >> 20, reps);
  auto gemm_or = Gemm::create();
  must(gemm_or.status(), "Gemm::create");
  std::unique_ptr<Gemm> gemm = std::move(*gemm_or);
  cudaStream_t stream = nullptr;
  BENCH_CUDA(cudaStreamCreate(&stream));

  const std::vector<Shape> shapes = {
      {"q/o", 3584, 3584, DType::kBF16},      {"k/v", 512, 3584, DType::kBF16},
      {"gate_up", 37888, 3584, DType::kBF16}, {"down", 3584, 18944, DType::kBF16},
      {"lm_head", 152064, 3584, DType::kF32},
  };
  const int64_t ms[] = {1, 4, 8};
  std::mt19937_64 rng(1234);

  std::printf("%-8s %2s %7s %6s %9s | %9s %8s %6s | %9s %8s %6s | %7s %9s\n", "layer", "M", "N", "K", "MB",
              "cublas us", "GB/s", "frac", "gemv us", "GB/s", "frac", "speedup", "max diff");
  for (const Shape& s : shapes) {
    const size_t w_bytes = static_cast<size_t>(s.n * s.k) * 2;
    const size_t copies = std::max<size_t>(2, ((size_t{256} << 20) + w_bytes - 1) / w_bytes);
    std::vector<void*> w(copies);
    for (auto& p : w) {
      BENCH_CUDA(cudaMalloc(&p, w_bytes));
      // Values do not change the speed; a small bf16 (0x3c3c ~ 0.0115) keeps outputs finite.
      BENCH_CUDA(cudaMemset(p, 0x3c, w_bytes));
    }
    const int64_t max_m = 8;
    std::vector<uint16_t> xh(static_cast<size_t>(max_m * s.k));
    for (auto& v : xh) v = loom::core::f32_to_bf16(std::uniform_real_distribution<float>(-1, 1)(rng));
    void *x = nullptr, *y_ref = nullptr, *y_new = nullptr;
    const size_t y_bytes = static_cast<size_t>(max_m * s.n) * loom::core::dtype_size(s.out);
    BENCH_CUDA(cudaMalloc(&x, xh.size() * 2));
    BENCH_CUDA(cudaMemcpy(x, xh.data(), xh.size() * 2, cudaMemcpyHostToDevice));
    BENCH_CUDA(cudaMalloc(&y_ref, y_bytes));
    BENCH_CUDA(cudaMalloc(&y_new, y_bytes));

    for (int64_t m : ms) {
      GemmArgs a;
      a.x = x;
      a.m = m, a.n = s.n, a.k = s.k;
      a.in_dtype = DType::kBF16, a.out_dtype = s.out;
      auto with = [&](int rep, void* y) {
        GemmArgs r = a;
        r.w = w[static_cast<size_t>(rep) % copies];
        r.y = y;
        return r;
      };
      if (!loom::backends::cuda::gemv_vectorized(with(0, y_new))) {
        std::fprintf(stderr, "%s: not on the gemv vector path\n", s.name);
        return 1;
      }
      const double t_ref =
          time_us(stream, reps, [&](int rep) { must(gemm->run(with(rep, y_ref), stream), "Gemm::run"); });
      const double t_new = time_us(
          stream, reps, [&](int rep) { must(loom::backends::cuda::gemv(with(rep, y_new), stream), "gemv"); });
      // Same inputs (copy 0) through both, compared.
      must(gemm->run(with(0, y_ref), stream), "Gemm::run");
      must(loom::backends::cuda::gemv(with(0, y_new), stream), "gemv");
      BENCH_CUDA(cudaStreamSynchronize(stream));
      std::vector<uint8_t> r1(y_bytes), r2(y_bytes);
      BENCH_CUDA(cudaMemcpy(r1.data(), y_ref, y_bytes, cudaMemcpyDeviceToHost));
      BENCH_CUDA(cudaMemcpy(r2.data(), y_new, y_bytes, cudaMemcpyDeviceToHost));
      double max_diff = 0, max_ref = 0;
      for (size_t i = 0; i < static_cast<size_t>(m * s.n); ++i) {
        const double u = to_float(r1, i, s.out), v = to_float(r2, i, s.out);
        max_diff = std::max(max_diff, std::abs(u - v));
        max_ref = std::max(max_ref, std::abs(u));
        if (std::isnan(u) || std::isnan(v)) max_diff = NAN;
      }
      const double bytes = static_cast<double>(w_bytes) + static_cast<double>(m * s.k * 2) +
                           static_cast<double>(m * s.n) * static_cast<double>(loom::core::dtype_size(s.out));
      const double gbs_ref = bytes / (t_ref * 1e3), gbs_new = bytes / (t_new * 1e3);
      std::printf("%-8s %2lld %7lld %6lld %9.1f | %9.2f %8.0f %5.1f%% | %9.2f %8.0f %5.1f%% | %6.2fx %9.2e\n",
                  s.name, static_cast<long long>(m), static_cast<long long>(s.n), static_cast<long long>(s.k),
                  bytes / 1e6, t_ref, gbs_ref, 100 * gbs_ref / peak, t_new, gbs_new, 100 * gbs_new / peak,
                  t_ref / t_new, max_ref > 0 ? max_diff / max_ref : max_diff);
      std::fflush(stdout);
    }
    for (auto* p : w) cudaFree(p);
    cudaFree(x);
    cudaFree(y_ref);
    cudaFree(y_new);
  }
  cudaStreamDestroy(stream);
  return 0;
}
