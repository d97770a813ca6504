// Norms, SiLU-and-mul, gathers, KV writes, casts and adds against the CPU reference
// (ops/reference_ops.h, f32/double on the same bf16/f16-rounded inputs) or plain loops.
//
// Tolerances: the GPU computes in f32 and rounds each output once to bf16/f16, the reference
// computes in double; so every element must be within 1 ulp of the storage type (relative to
// |ref|) plus a small absolute floor for results near zero. Data movement (gather, write_kv),
// rounding adds and casts must be bit-exact. Outputs are poisoned with NaN before each call.
#include <algorithm>
#include <numeric>
#include <vector>

#include "backends/cuda/kernels.h"
#include "cuda_test_util.h"
#include "ops/reference_ops.h"

namespace loom::backends::cuda {
namespace {

using core::DType;
using core::Tensor;
using testing::DeviceBuffer;
using testing::HalfData;

Tensor host_f32(const std::vector<float>& v, core::Shape shape) {
  Tensor t = Tensor::empty(std::move(shape), DType::kF32);
  EXPECT_EQ(static_cast<size_t>(t.numel()), v.size());
  std::memcpy(t.data(), v.data(), v.size() * sizeof(float));
  return t;
}

std::vector<double> as_double(const Tensor& t) {
  return testing::to_double(t.data_as<float>(), static_cast<size_t>(t.numel()));
}

class CudaKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LOOM_REQUIRE_CUDA();
    LOOM_ASSERT_CUDA(cudaStreamCreate(&stream_));
    ref_ = ops::make_reference_ops();
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  void sync() { ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess); }

  cudaStream_t stream_ = nullptr;
  std::unique_ptr<ops::Ops> ref_;
};

// A norm weight in `wdtype` on the device, and the same values as a reference tensor.
struct Weight {
  std::unique_ptr<DeviceBuffer> buf;
  Tensor ref;  // f32 values (exactly the device values)
  NormWeight view() const { return {buf->get(), dtype}; }
  DType dtype;
};

Weight make_weight(int64_t n, DType wdtype, std::mt19937_64& rng) {
  Weight w;
  w.dtype = wdtype;
  std::vector<float> vals(static_cast<size_t>(n));
  if (wdtype == DType::kF32) {
    for (float& v : vals) v = testing::uniform(rng, 0.5f, 1.5f);
    w.buf = std::make_unique<DeviceBuffer>(vals.size() * 4);
    w.buf->upload(vals);
  } else {
    HalfData h = testing::random_half(vals.size(), wdtype, rng, 0.5f, 1.5f);
    vals = h.f32;
    w.buf = std::make_unique<DeviceBuffer>(vals.size() * 2);
    w.buf->upload(h.bits);
  }
  w.ref = host_f32(vals, {n});
  return w;
}

// ---- rms_norm -----------------------------------------------------------------------------------

TEST_F(CudaKernelsTest, RmsNormGrid) {
  LOOM_CUDA_SEEDED_RNG(rng);
  const float eps = 1e-6f;
  for (DType dt : {DType::kBF16, DType::kF16})
    for (DType wdt : {DType::kF32, DType::kBF16})
      for (int64_t h : {64, 100, 896, 3584, 4096})
        for (int64_t t : {1, 7, 97, 1000}) {
          SCOPED_TRACE(std::string(core::dtype_name(dt)) + " weight " + std::string(core::dtype_name(wdt)) +
                       " T=" + std::to_string(t) + " H=" + std::to_string(h));
          HalfData x = testing::random_half(static_cast<size_t>(t * h), dt, rng, -2.0f, 2.0f);
          Weight w = make_weight(h, wdt, rng);
          DeviceBuffer dx(x.bits.size() * 2), dy(x.bits.size() * 2);
          dx.upload(x.bits);
          dy.poison();
          LOOM_ASSERT_OK(rms_norm(dx.get(), w.view(), eps, dy.get(), t, h, dt, stream_));
          sync();
          const std::vector<float> got = testing::upcast(dy.download<uint16_t>(x.bits.size()), dt);
          Tensor xr = host_f32(x.f32, {t, h}), yr = Tensor::empty({t, h}, DType::kF32);
          ref_->rms_norm(xr, w.ref, eps, yr);
          EXPECT_TRUE(testing::close_to(got, as_double(yr), dt, 1.0, 1e-6));
        }
}

TEST_F(CudaKernelsTest, RmsNormInPlace) {
  LOOM_CUDA_SEEDED_RNG(rng);
  const int64_t t = 13, h = 896;
  HalfData x = testing::random_half(static_cast<size_t>(t * h), DType::kBF16, rng, -3.0f, 3.0f);
  Weight w = make_weight(h, DType::kF32, rng);
  DeviceBuffer dx(x.bits.size() * 2);
  dx.upload(x.bits);
  LOOM_ASSERT_OK(rms_norm(dx.get(), w.view(), 1e-5f, dx.get(), t, h, DType::kBF16, stream_));
  sync();
  Tensor xr = host_f32(x.f32, {t, h}), yr = Tensor::empty({t, h}, DType::kF32);
  ref_->rms_norm(xr, w.ref, 1e-5f, yr);
  EXPECT_TRUE(testing::close_to(testing::upcast(dx.download<uint16_t>(x.bits.size()), DType::kBF16),
                                as_double(yr), DType::kBF16, 1.0, 1e-6));
}

TEST_F(CudaKernelsTest, AddRmsNormRoundsTheResidualThenNormalisesIt) {
  LOOM_CUDA_SEEDED_RNG(rng);
  const float eps = 1e-6f;
  for (DType dt : {DType::kBF16, DType::kF16})
    for (int64_t h : {64, 100, 896, 3584})
      for (int64_t t : {1, 7, 97, 1000})
        for (bool y_aliases_x : {false, true}) {
          SCOPED_TRACE(std::string(core::dtype_name(dt)) + " T=" + std::to_string(t) +
                       " H=" + std::to_string(h) + (y_aliases_x ? " y=x" : ""));
          const size_t n = static_cast<size_t>(t * h);
          HalfData res = testing::random_half(n, dt, rng, -4.0f, 4.0f);
          HalfData x = testing::random_half(n, dt, rng, -1.0f, 1.0f);
          Weight w = make_weight(h, DType::kBF16, rng);
          // The residual stream transformers keeps in bf16: an f32 add rounded once.
          std::vector<uint16_t> sum_bits(n);
          for (size_t i = 0; i < n; ++i) sum_bits[i] = testing::to_half_bits(res.f32[i] + x.f32[i], dt);
          DeviceBuffer dr(n * 2), dx(n * 2), dy(n * 2);
          dr.upload(res.bits);
          dx.upload(x.bits);
          dy.poison();
          void* y = y_aliases_x ? dx.get() : dy.get();
          LOOM_ASSERT_OK(add_rms_norm(dr.get(), dx.get(), w.view(), eps, y, t, h, dt, stream_));
          sync();
          EXPECT_EQ(dr.download<uint16_t>(n), sum_bits) << "residual is not the once-rounded sum";
          const std::vector<float> got = testing::upcast((y_aliases_x ? dx : dy).download<uint16_t>(n), dt);
          Tensor sr = host_f32(testing::upcast(sum_bits, dt), {t, h}),
                 yr = Tensor::empty({t, h}, DType::kF32);
          ref_->rms_norm(sr, w.ref, eps, yr);
          EXPECT_TRUE(testing::close_to(got, as_double(yr), dt, 1.0, 1e-6));
        }
  DeviceBuffer b(1024);
  NormWeight w{b.get(), DType::kF32};
  EXPECT_EQ(add_rms_norm(b.get(), b.get(), w, eps, b.get(), 1, 64, DType::kBF16, stream_).code(),
            core::StatusCode::kInvalidArgument);  // y aliasing residual
}

// Per-head norm on views of a fused qkv buffer; everything outside the view stays as it was.
TEST_F(CudaKernelsTest, HeadRmsNormOnStridedViews) {
  LOOM_CUDA_SEEDED_RNG(rng);
  const float eps = 1e-6f;
  for (DType dt : {DType::kBF16, DType::kF16})
    for (int64_t d : {64, 128, 72, 80, 20})
      for (int64_t heads : {1, 4, 7})
        for (int64_t t : {1, 7, 97})
          for (int64_t extra_heads : {0, 3}) {
            SCOPED_TRACE(std::string(core::dtype_name(dt)) + " D=" + std::to_string(d) +
                         " heads=" + std::to_string(heads) + " T=" + std::to_string(t) +
                         " extra=" + std::to_string(extra_heads));
            const int64_t stride = (heads + extra_heads) * d;
            const size_t n = static_cast<size_t>(t * stride);
            HalfData buf = testing::random_half(n, dt, rng, -2.0f, 2.0f);
            Weight w = make_weight(d, DType::kF32, rng);
            DeviceBuffer db(n * 2);
            db.upload(buf.bits);
            HeadView v{db.get(), t, heads, d, extra_heads == 0 ? 0 : stride, dt};
            LOOM_ASSERT_OK(head_rms_norm(v, w.view(), eps, stream_));
            sync();
            const std::vector<uint16_t> out = db.download<uint16_t>(n);
            std::vector<float> rows, got;
            for (int64_t i = 0; i < t; ++i)
              for (int64_t j = 0; j < heads * d; ++j) {
                rows.push_back(buf.f32[i * stride + j]);
                got.push_back(testing::from_half_bits(out[i * stride + j], dt));
              }
            for (int64_t i = 0; i < t; ++i)
              for (int64_t j = heads * d; j < stride; ++j)
                ASSERT_EQ(out[i * stride + j], buf.bits[i * stride + j]) << "wrote outside the view";
            Tensor xr = host_f32(rows, {t * heads, d}), yr = Tensor::empty({t * heads, d}, DType::kF32);
            ref_->rms_norm(xr, w.ref, eps, yr);
            EXPECT_TRUE(testing::close_to(got, as_double(yr), dt, 1.0, 1e-6));
          }
}

// ---- silu_mul -----------------------------------------------------------------------------------

TEST_F(CudaKernelsTest, SiluMul) {
  LOOM_CUDA_SEEDED_RNG(rng);
  for (DType dt : {DType::kBF16, DType::kF16})
    for (int64_t inter : {64, 100, 4864, 9472})
      for (int64_t t : {1, 7, 97}) {
        SCOPED_TRACE(std::string(core::dtype_name(dt)) + " T=" + std::to_string(t) +
                     " I=" + std::to_string(inter));
        HalfData gu = testing::random_half(static_cast<size_t>(t * 2 * inter), dt, rng, -6.0f, 6.0f);
        DeviceBuffer dg(gu.bits.size() * 2), dout(static_cast<size_t>(t * inter) * 2);
        dg.upload(gu.bits);
        dout.poison();
        LOOM_ASSERT_OK(silu_mul(dg.get(), dout.get(), t, inter, dt, stream_));
        sync();
        const std::vector<float> got =
            testing::upcast(dout.download<uint16_t>(static_cast<size_t>(t * inter)), dt);
        Tensor g = host_f32(gu.f32, {t, 2 * inter}), o = Tensor::empty({t, inter}, DType::kF32);
        ref_->silu_mul(g, o);
        EXPECT_TRUE(testing::close_to(got, as_double(o), dt, 1.0, 1e-6));
      }
}

// ---- gather_rows --------------------------------------------------------------------------------

TEST_F(CudaKernelsTest, GatherRowsIsExactAndNaNsBadIds) {
  LOOM_CUDA_SEEDED_RNG(rng);
  const int64_t vocab = 1000;
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32})
    for (int64_t h : {64, 7, 896, 3})
      for (int64_t count : {1, 7, 97}) {
        SCOPED_TRACE(std::string(core::dtype_name(dt)) + " H=" + std::to_string(h) +
                     " count=" + std::to_string(count));
        const size_t es = core::dtype_size(dt);
        std::vector<uint8_t> table(static_cast<size_t>(vocab * h) * es);
        for (uint8_t& b : table) b = static_cast<uint8_t>(rng() & 0x3f);  // finite in every dtype
        std::vector<int32_t> ids(static_cast<size_t>(count));
        for (int32_t& id : ids) id = static_cast<int32_t>(testing::uniform_int(rng, 0, vocab - 1));
        if (count >= 7) ids[3] = ids[5];  // repeats are fine
        const bool with_bad = count >= 7;
        if (with_bad) ids[1] = -1, ids[6] = static_cast<int32_t>(vocab);
        DeviceBuffer dt_(table.size()), di(ids.size() * 4), dout(static_cast<size_t>(count * h) * es);
        dt_.upload(table);
        di.upload(ids);
        dout.poison();
        LOOM_ASSERT_OK(gather_rows(dt_.get(), vocab, h, dt, di.as<int32_t>(), count, dout.get(), stream_));
        sync();
        const std::vector<uint8_t> out = dout.download<uint8_t>(static_cast<size_t>(count * h) * es);
        const size_t row = static_cast<size_t>(h) * es;
        for (int64_t i = 0; i < count; ++i) {
          const uint8_t* o = out.data() + i * row;
          if (ids[i] < 0 || ids[i] >= vocab) {
            for (int64_t j = 0; j < h; ++j) {
              float v;
              if (dt == DType::kF32) {
                std::memcpy(&v, o + j * 4, 4);
              } else {
                uint16_t b;
                std::memcpy(&b, o + j * 2, 2);
                v = testing::from_half_bits(b, dt);
              }
              ASSERT_TRUE(std::isnan(v)) << "row " << i << " of bad id " << ids[i];
            }
          } else {
            ASSERT_EQ(std::memcmp(o, table.data() + ids[i] * row, row), 0) << "row " << i;
          }
        }
      }
}

// ---- write_kv -----------------------------------------------------------------------------------

TEST_F(CudaKernelsTest, WriteKvFromFusedQkv) {
  LOOM_CUDA_SEEDED_RNG(rng);
  const int64_t num_blocks = 128;
  for (DType dt : {DType::kBF16, DType::kF16})
    for (int64_t block_size : {1, 16})
      for (int64_t kv_heads : {1, 2, 4})
        for (int64_t d : {64, 128, 80, 5})
          for (int64_t t : {1, 7, 97}) {
            SCOPED_TRACE(std::string(core::dtype_name(dt)) + " block_size=" + std::to_string(block_size) +
                         " kv_heads=" + std::to_string(kv_heads) + " D=" + std::to_string(d) +
                         " T=" + std::to_string(t));
            const int64_t q_heads = 2 * kv_heads;
            const int64_t stride = (q_heads + 2 * kv_heads) * d;  // [q | k | v] per token
            const int64_t row = kv_heads * d;
            const int64_t slots = num_blocks * block_size;
            HalfData qkv = testing::random_half(static_cast<size_t>(t * stride), dt, rng);
            HalfData kc = testing::random_half(static_cast<size_t>(slots * row), dt, rng);
            HalfData vc = testing::random_half(static_cast<size_t>(slots * row), dt, rng);
            std::vector<int32_t> perm(static_cast<size_t>(slots));
            std::iota(perm.begin(), perm.end(), 0);
            std::shuffle(perm.begin(), perm.end(), rng);
            std::vector<int32_t> slot(perm.begin(), perm.begin() + t);
            for (int32_t& s : slot)
              if (testing::uniform_int(rng, 0, 9) == 0) s = -1;  // padding
            DeviceBuffer dq(qkv.bits.size() * 2), dk(kc.bits.size() * 2), dv(vc.bits.size() * 2),
                ds(slot.size() * 4);
            dq.upload(qkv.bits);
            dk.upload(kc.bits);
            dv.upload(vc.bits);
            ds.upload(slot);
            HeadView k{static_cast<uint16_t*>(dq.get()) + q_heads * d, t, kv_heads, d, stride, dt};
            HeadView v{
                static_cast<uint16_t*>(dq.get()) + (q_heads + kv_heads) * d, t, kv_heads, d, stride, dt};
            KvCacheView cache{dk.get(), dv.get(), num_blocks, block_size, kv_heads, d, dt};
            LOOM_ASSERT_OK(write_kv(k, v, ds.as<int32_t>(), cache, stream_));
            sync();
            std::vector<uint16_t> ek = kc.bits, ev = vc.bits;
            for (int64_t i = 0; i < t; ++i) {
              if (slot[i] < 0) continue;
              for (int64_t j = 0; j < row; ++j) {
                ek[slot[i] * row + j] = qkv.bits[i * stride + q_heads * d + j];
                ev[slot[i] * row + j] = qkv.bits[i * stride + (q_heads + kv_heads) * d + j];
              }
            }
            EXPECT_EQ(dk.download<uint16_t>(ek.size()), ek);
            EXPECT_EQ(dv.download<uint16_t>(ev.size()), ev);
          }
}

TEST_F(CudaKernelsTest, WriteKvRejectsMismatchedShapes) {
  DeviceBuffer b(1 << 16);
  HeadView k{b.get(), 4, 2, 64, 0, DType::kBF16};
  KvCacheView cache{b.get(), b.get(), 4, 16, 4, 64, DType::kBF16};  // kv_heads 4 != 2
  EXPECT_EQ(write_kv(k, k, b.as<int32_t>(), cache, stream_).code(), core::StatusCode::kInvalidArgument);
  cache.kv_heads = 2;
  cache.dtype = DType::kF16;
  EXPECT_EQ(write_kv(k, k, b.as<int32_t>(), cache, stream_).code(), core::StatusCode::kInvalidArgument);
}

// ---- cast / add ---------------------------------------------------------------------------------

// Host conversion of one value between f32 / bf16 / f16 (RNE), through f32.
uint32_t host_convert(uint32_t bits, DType from, DType to) {
  float f;
  if (from == DType::kF32) {
    std::memcpy(&f, &bits, 4);
  } else {
    f = testing::from_half_bits(static_cast<uint16_t>(bits), from);
  }
  if (to == DType::kF32) {
    uint32_t out;
    std::memcpy(&out, &f, 4);
    return out;
  }
  return testing::to_half_bits(f, to);
}

bool bits_nan(uint32_t bits, DType t) {
  if (t == DType::kF32) {
    float f;
    std::memcpy(&f, &bits, 4);
    return std::isnan(f);
  }
  return std::isnan(testing::from_half_bits(static_cast<uint16_t>(bits), t));
}

TEST_F(CudaKernelsTest, CastsRoundToNearestEven) {
  LOOM_CUDA_SEEDED_RNG(rng);
  const DType types[] = {DType::kF32, DType::kBF16, DType::kF16};
  for (DType from : types)
    for (DType to : types) {
      SCOPED_TRACE(std::string(core::dtype_name(from)) + " -> " + std::string(core::dtype_name(to)));
      const size_t n = 100003;
      const size_t fes = core::dtype_size(from), tes = core::dtype_size(to);
      std::vector<uint32_t> src(n);
      for (size_t i = 0; i < n; ++i) {
        // Mostly ordinary values over a wide range (overflow, subnormals and ties included), a few
        // raw bit patterns (inf, NaN).
        const float mag = std::ldexp(testing::uniform(rng, 1.0f, 2.0f),
                                     static_cast<int>(testing::uniform_int(rng, -30, 20)));
        float f = (rng() & 1) ? mag : -mag;
        uint32_t b;
        std::memcpy(&b, &f, 4);
        if (i % 97 == 0) b = static_cast<uint32_t>(rng());
        src[i] = from == DType::kF32 ? b : (i % 97 == 0 ? (b & 0xffffu) : testing::to_half_bits(f, from));
      }
      std::vector<uint8_t> src_bytes(n * fes);
      for (size_t i = 0; i < n; ++i) std::memcpy(src_bytes.data() + i * fes, &src[i], fes);
      DeviceBuffer ds(src_bytes.size()), dd(n * tes);
      ds.upload(src_bytes);
      dd.poison();
      LOOM_ASSERT_OK(cast(ds.get(), from, dd.get(), to, static_cast<int64_t>(n), stream_));
      sync();
      const std::vector<uint8_t> out = dd.download<uint8_t>(n * tes);
      for (size_t i = 0; i < n; ++i) {
        uint32_t got = 0;
        std::memcpy(&got, out.data() + i * tes, tes);
        const uint32_t want = host_convert(src[i], from, to);
        if (bits_nan(src[i], from)) {
          ASSERT_TRUE(bits_nan(got, to)) << i;
        } else {
          ASSERT_EQ(got, want) << "element " << i << " source bits 0x" << std::hex << src[i];
        }
      }
    }
}

TEST_F(CudaKernelsTest, AddRoundsOnce) {
  LOOM_CUDA_SEEDED_RNG(rng);
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16})
    for (int64_t n : {1, 7, 8, 1000, 1003, 65536})
      for (bool alias : {false, true}) {
        SCOPED_TRACE(std::string(core::dtype_name(dt)) + " n=" + std::to_string(n) + (alias ? " out=a" : ""));
        const size_t es = core::dtype_size(dt);
        std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
        std::vector<uint8_t> ab(n * es), bb(n * es), want(n * es);
        for (int64_t i = 0; i < n; ++i) {
          a[i] = testing::uniform(rng, -8, 8);
          b[i] = testing::uniform(rng, -8, 8);
          if (dt != DType::kF32) {
            const uint16_t ah = testing::to_half_bits(a[i], dt), bh = testing::to_half_bits(b[i], dt);
            a[i] = testing::from_half_bits(ah, dt);
            b[i] = testing::from_half_bits(bh, dt);
            const uint16_t s = testing::to_half_bits(a[i] + b[i], dt);
            std::memcpy(ab.data() + i * 2, &ah, 2);
            std::memcpy(bb.data() + i * 2, &bh, 2);
            std::memcpy(want.data() + i * 2, &s, 2);
          } else {
            const float s = a[i] + b[i];
            std::memcpy(ab.data() + i * 4, &a[i], 4);
            std::memcpy(bb.data() + i * 4, &b[i], 4);
            std::memcpy(want.data() + i * 4, &s, 4);
          }
        }
        DeviceBuffer da(ab.size()), db(bb.size()), dout(ab.size());
        da.upload(ab);
        db.upload(bb);
        dout.poison();
        void* out = alias ? da.get() : dout.get();
        LOOM_ASSERT_OK(add(da.get(), db.get(), out, n, dt, stream_));
        sync();
        EXPECT_EQ((alias ? da : dout).download<uint8_t>(ab.size()), want);
      }
}

}  // namespace
}  // namespace loom::backends::cuda
