// Gated activations (SiLU / GELU-erf / GELU-tanh) times a gate, forward and backward.
// No torch headers: the binding checks tensors and calls the launchers declared in activation.cuh.
//
// Each thread moves 16-byte packs of `a` (and the matching packs of `b`, `grad_out`), so the
// kernels are memory-bound. A block is kThreads threads shaped (tx, ty): tx threads across the
// columns of a row and ty rows per block, so narrow rows still fill a block. Rows whose length or
// base pointers do not allow 16-byte packs fall back to one element per thread.
#include "activation.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace activation_kernels {
namespace {

constexpr int kThreads = 256;
// Packs per thread per loop step (loads first, then math): measured on an H200, two packs lift the
// forward from ~3.7 to ~4.0 TB/s (bf16) and ~3.5 to ~4.2 TB/s (fp32), while the backward, which
// already has three loads in flight, drops from ~4.1 to ~3.0 TB/s (bf16) with two.
constexpr int kForwardUnroll = 2;
constexpr int kBackwardUnroll = 1;
constexpr int64_t kMaxGridX = 2147483647;
constexpr int64_t kMaxGridY = 65535;

// ---- conversions -----------------------------------------------------------------------------

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Packs of 16-bit types convert two elements at a time: one F2FP pack per pair on the way out and
// a shift/mask (bf16) or HADD2.F32 (fp16) per element on the way in, straight from the loaded word.
template <typename T>
struct Pair;
template <>
struct Pair<float> {
  using type = float2;
  static __device__ __forceinline__ float2 to_float2(float2 v) { return v; }
  static __device__ __forceinline__ float2 from_float2(float2 v) { return v; }
};
template <>
struct Pair<__half> {
  using type = __half2;
  static __device__ __forceinline__ float2 to_float2(__half2 v) { return __half22float2(v); }
  static __device__ __forceinline__ __half2 from_float2(float2 v) {
    return __floats2half2_rn(v.x, v.y);
  }
};
template <>
struct Pair<__nv_bfloat16> {
  using type = __nv_bfloat162;
  // A bf16 is the top half of its float: a shift and a mask, exact. __bfloat1622float2 compiles
  // to a PRMT per high half that the compiler hoists next to the loads, costing ~16 registers.
  static __device__ __forceinline__ float2 to_float2(__nv_bfloat162 v) {
    const unsigned w = reinterpret_cast<const unsigned&>(v);
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
  }
  static __device__ __forceinline__ __nv_bfloat162 from_float2(float2 v) {
    return __floats2bfloat162_rn(v.x, v.y);
  }
};

// ---- fast math ---------------------------------------------------------------------------------
//
// The hardware approximations replace expf (range reduction, ~8 instructions) and IEEE division
// (Newton steps plus a branch to a slow path per element, which also keeps the compiler from
// interleaving elements). Both are what torch.compile's Triton code uses.
//   exp2_approx: ex2.approx.ftz, relative error <= 2^-22 (2 ulp). Each caller folds log2(e) into
//     its constants; rounding t = x * log2(e) adds a relative error of |x| * 2^-24 to e^x, which
//     stays under 2^-20 wherever the result is not flushed away below (|x| <= 16), and beyond
//     that e^x only enters through a term that is negligible next to the fp32 tolerance.
//     Subnormal results flush to 0; 2^+inf = inf, 2^-inf = 0, NaN stays NaN.
//   __fdividef(x, y) (div.approx: rcp.approx then a multiply): relative error <= 2 ulp for
//     |y| in [2^-126, 2^126]; for |y| > 2^126 it returns 0 (and x * 0 = NaN when x = +-inf).
//     Every divisor here is 1 + e with e >= 0, so |y| >= 1; y > 2^126 only when the exact
//     result is below 2^-120 * |x| and is 0 in fp16/bf16 anyway.
// With these, a sum of a few 2-ulp errors (~2^-21 relative) stays far inside the fp32 test
// tolerance (rtol 1e-5 ~ 2^-16.6) and below half an ulp of fp16 (2^-11) and bf16 (2^-8).

constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float exp2_approx(float t) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(t));
  return r;
}

// ---- activations: value and derivative in float32 --------------------------------------------
//
// inf/NaN inputs give what torch's own CUDA kernels give (same formulas, see
// tests/test_activation.py::test_special_values): NaN stays NaN; silu(+inf) = inf and
// silu(-inf) = -inf / inf = NaN; gelu(+-inf) as 0.5 a (1 + erf) gives inf and NaN; gelu_tanh
// likewise inf and NaN, and a finite a so negative that e^{-2u} overflows gives -0, as torch's
// 0.5 a (1 + tanh u) with tanh u == -1 does.

struct Silu {
  // silu(a) = a / (1 + e^{-a}).
  static __device__ __forceinline__ float fwd(float a) {
    return __fdividef(a, 1.0f + exp2_approx(-kLog2e * a));
  }
  static __device__ __forceinline__ void fwd_bwd(float a, float& f, float& df) {
    const float s = __fdividef(1.0f, 1.0f + exp2_approx(-kLog2e * a));
    f = a * s;
    df = s * (1.0f + a * (1.0f - s));
  }
};

// erff stays: on sm_90 it is a branch-free polynomial with one MUFU.EX2 (~1 ulp), already cheap,
// and a faster form would need its own accuracy argument for the fp32 path.
struct GeluErf {
  static constexpr float kSqrt1_2 = 0.70710678118654752f;    // 1 / sqrt(2)
  static constexpr float kInvSqrt2Pi = 0.39894228040143268f;  // 1 / sqrt(2 pi)
  static __device__ __forceinline__ float fwd(float a) {
    return 0.5f * a * (1.0f + erff(a * kSqrt1_2));
  }
  static __device__ __forceinline__ void fwd_bwd(float a, float& f, float& df) {
    const float cdf = 0.5f * (1.0f + erff(a * kSqrt1_2));
    f = a * cdf;
    df = cdf + a * kInvSqrt2Pi * exp2_approx((-0.5f * kLog2e) * a * a);
  }
};

// gelu_tanh(a) = 0.5 a (1 + tanh u) = a * s with s = sigmoid(2u) = 1 / (1 + e), e = e^{-2u},
// u = sqrt(2/pi) (a + 0.044715 a^3); 1 - s = e * s. Neither form subtracts nearly equal numbers
// (1 + tanh u and 1 - tanh^2 u would for large |u|). -2u log2(e) = a (kT1 + kT3 a^2).
struct GeluTanh {
  static constexpr float kSqrt2OverPi = 0.79788456080286536f;  // sqrt(2 / pi)
  static constexpr float kCoeff = 0.044715f;
  static constexpr float kT1 = -2.0f * kSqrt2OverPi * kLog2e;
  static constexpr float kT3 = kT1 * kCoeff;
  static __device__ __forceinline__ float fwd(float a) {
    return __fdividef(a, 1.0f + exp2_approx(a * (kT1 + kT3 * a * a)));
  }
  static __device__ __forceinline__ void fwd_bwd(float a, float& f, float& df) {
    const float e = exp2_approx(a * (kT1 + kT3 * a * a));
    const float s = __fdividef(1.0f, 1.0f + e);
    f = a * s;
    // s (1 - s) = s * (e s); e s lies in [0, 1] but is inf * 0 = NaN once e overflows (s == 0),
    // where fminf picks 1 and the product is the correct 0.
    const float ds = s * fminf(e * s, 1.0f);
    df = s + 2.0f * kSqrt2OverPi * a * ds * (1.0f + 3.0f * kCoeff * a * a);
  }
};

// ---- kernels -----------------------------------------------------------------------------------

template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
  T v[VEC];
};

template <typename Act, typename T, int VEC, int UNROLL>
__global__ void __launch_bounds__(kThreads)
    act_and_mul_kernel(T* __restrict__ out, const T* __restrict__ x, int64_t rows, int64_t d) {
  using P = Pack<T, VEC>;
  const int64_t nvec = d / VEC;
  const int64_t row_stride = static_cast<int64_t>(gridDim.x) * blockDim.y;
  const int64_t col_stride = static_cast<int64_t>(gridDim.y) * blockDim.x * UNROLL;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; r < rows;
       r += row_stride) {
    const P* a = reinterpret_cast<const P*>(x + r * 2 * d);
    const P* b = reinterpret_cast<const P*>(x + r * 2 * d + d);
    P* o = reinterpret_cast<P*>(out + r * d);
    for (int64_t i0 = static_cast<int64_t>(blockIdx.y) * blockDim.x * UNROLL + threadIdx.x;
         i0 < nvec; i0 += col_stride) {
      // All loads first, so UNROLL * 2 independent 16-byte loads are in flight per thread.
      P pa[UNROLL], pb[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int64_t i = i0 + u * static_cast<int64_t>(blockDim.x);
        if (i < nvec) {
          pa[u] = a[i];
          pb[u] = b[i];
        }
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int64_t i = i0 + u * static_cast<int64_t>(blockDim.x);
        if (i < nvec) {
          P po;
          if constexpr (VEC == 1) {
            po.v[0] = from_float<T>(Act::fwd(to_float(pa[u].v[0])) * to_float(pb[u].v[0]));
          } else {
            using T2 = typename Pair<T>::type;
            const T2* a2 = reinterpret_cast<const T2*>(pa[u].v);
            const T2* b2 = reinterpret_cast<const T2*>(pb[u].v);
            T2* o2 = reinterpret_cast<T2*>(po.v);
#pragma unroll
            for (int k = 0; k < VEC / 2; ++k) {
              const float2 av = Pair<T>::to_float2(a2[k]);
              const float2 bv = Pair<T>::to_float2(b2[k]);
              o2[k] = Pair<T>::from_float2(
                  make_float2(Act::fwd(av.x) * bv.x, Act::fwd(av.y) * bv.y));
            }
          }
          o[i] = po;
        }
      }
    }
  }
}

template <typename Act, typename T, int VEC, int UNROLL>
__global__ void __launch_bounds__(kThreads)
    act_and_mul_backward_kernel(T* __restrict__ grad_x, const T* __restrict__ grad_out,
                                const T* __restrict__ x, int64_t rows, int64_t d) {
  using P = Pack<T, VEC>;
  const int64_t nvec = d / VEC;
  const int64_t row_stride = static_cast<int64_t>(gridDim.x) * blockDim.y;
  const int64_t col_stride = static_cast<int64_t>(gridDim.y) * blockDim.x * UNROLL;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; r < rows;
       r += row_stride) {
    const P* a = reinterpret_cast<const P*>(x + r * 2 * d);
    const P* b = reinterpret_cast<const P*>(x + r * 2 * d + d);
    const P* g = reinterpret_cast<const P*>(grad_out + r * d);
    P* ga = reinterpret_cast<P*>(grad_x + r * 2 * d);
    P* gb = reinterpret_cast<P*>(grad_x + r * 2 * d + d);
    for (int64_t i0 = static_cast<int64_t>(blockIdx.y) * blockDim.x * UNROLL + threadIdx.x;
         i0 < nvec; i0 += col_stride) {
      P pa[UNROLL], pb[UNROLL], pg[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int64_t i = i0 + u * static_cast<int64_t>(blockDim.x);
        if (i < nvec) {
          pa[u] = a[i];
          pb[u] = b[i];
          pg[u] = g[i];
        }
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int64_t i = i0 + u * static_cast<int64_t>(blockDim.x);
        if (i < nvec) {
          P pga, pgb;
          if constexpr (VEC == 1) {
            float f, df;
            Act::fwd_bwd(to_float(pa[u].v[0]), f, df);
            const float gk = to_float(pg[u].v[0]);
            pga.v[0] = from_float<T>(gk * to_float(pb[u].v[0]) * df);
            pgb.v[0] = from_float<T>(gk * f);
          } else {
            using T2 = typename Pair<T>::type;
            const T2* a2 = reinterpret_cast<const T2*>(pa[u].v);
            const T2* b2 = reinterpret_cast<const T2*>(pb[u].v);
            const T2* g2 = reinterpret_cast<const T2*>(pg[u].v);
            T2* ga2 = reinterpret_cast<T2*>(pga.v);
            T2* gb2 = reinterpret_cast<T2*>(pgb.v);
#pragma unroll
            for (int k = 0; k < VEC / 2; ++k) {
              const float2 av = Pair<T>::to_float2(a2[k]);
              const float2 bv = Pair<T>::to_float2(b2[k]);
              const float2 gv = Pair<T>::to_float2(g2[k]);
              float fx, dfx, fy, dfy;
              Act::fwd_bwd(av.x, fx, dfx);
              Act::fwd_bwd(av.y, fy, dfy);
              ga2[k] = Pair<T>::from_float2(make_float2(gv.x * bv.x * dfx, gv.y * bv.y * dfy));
              gb2[k] = Pair<T>::from_float2(make_float2(gv.x * fx, gv.y * fy));
            }
          }
          ga[i] = pga;
          gb[i] = pgb;
        }
      }
    }
  }
}

// ---- launch helpers ----------------------------------------------------------------------------

struct LaunchShape {
  dim3 grid;
  dim3 block;
};

// tx threads across a row (a power of two covering nvec packs, up to kThreads) and
// ty = kThreads / tx rows per block, so narrow rows still fill the block.
// Mid shapes: 4096 rows x 4096 bf16/fp16 columns is nvec = 512, tx = 256, ty = 1: 4096 one-row
// blocks, each thread 2 packs of a and of b (64 B) in flight. The 16-bit forward kernels use
// 40 registers (sm_90a), so 6 blocks (1536 threads, ~96 KB of loads) fit per SM, above the
// ~30-40 KB an SM needs in flight for its share of HBM bandwidth: 792 blocks per wave, 5.2 waves.
// The partial last wave is left alone: blocks here are short and retire independently, and forcing
// 8 blocks per SM (__launch_bounds__(256, 8), 32 registers) spills 16-40 bytes to the stack.
LaunchShape launch_shape(int64_t rows, int64_t nvec, int unroll) {
  unsigned tx = 1;
  while (tx < kThreads && static_cast<int64_t>(tx) * unroll < nvec) tx *= 2;
  const unsigned ty = kThreads / tx;
  const int64_t cols_per_block = static_cast<int64_t>(tx) * unroll;
  int64_t gx = (rows + ty - 1) / ty;
  int64_t gy = (nvec + cols_per_block - 1) / cols_per_block;
  gx = gx < kMaxGridX ? gx : kMaxGridX;
  gy = gy < kMaxGridY ? gy : kMaxGridY;
  return {dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy)), dim3(tx, ty)};
}

bool aligned(const void* p, int bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % static_cast<std::uintptr_t>(bytes) == 0;
}

template <typename Act, typename T>
cudaError_t launch_forward(void* out, const void* x, int64_t rows, int64_t d,
                           cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  T* o = static_cast<T*>(out);
  const T* in = static_cast<const T*>(x);
  if (d % kVec == 0 && aligned(out, 16) && aligned(x, 16)) {
    const LaunchShape s = launch_shape(rows, d / kVec, kForwardUnroll);
    act_and_mul_kernel<Act, T, kVec, kForwardUnroll><<<s.grid, s.block, 0, stream>>>(o, in, rows, d);
  } else {
    const LaunchShape s = launch_shape(rows, d, kForwardUnroll);
    act_and_mul_kernel<Act, T, 1, kForwardUnroll><<<s.grid, s.block, 0, stream>>>(o, in, rows, d);
  }
  return cudaGetLastError();
}

template <typename Act, typename T>
cudaError_t launch_backward(void* grad_x, const void* grad_out, const void* x, int64_t rows,
                            int64_t d, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  T* gx = static_cast<T*>(grad_x);
  const T* g = static_cast<const T*>(grad_out);
  const T* in = static_cast<const T*>(x);
  if (d % kVec == 0 && aligned(grad_x, 16) && aligned(grad_out, 16) && aligned(x, 16)) {
    const LaunchShape s = launch_shape(rows, d / kVec, kBackwardUnroll);
    act_and_mul_backward_kernel<Act, T, kVec, kBackwardUnroll>
        <<<s.grid, s.block, 0, stream>>>(gx, g, in, rows, d);
  } else {
    const LaunchShape s = launch_shape(rows, d, kBackwardUnroll);
    act_and_mul_backward_kernel<Act, T, 1, kBackwardUnroll>
        <<<s.grid, s.block, 0, stream>>>(gx, g, in, rows, d);
  }
  return cudaGetLastError();
}

template <typename Act>
cudaError_t dispatch_forward(void* out, const void* x, int64_t rows, int64_t d, int dtype,
                             cudaStream_t stream) {
  if (rows < 0 || d < 0) return cudaErrorInvalidValue;
  if (rows == 0 || d == 0) return cudaSuccess;
  switch (dtype) {
    case kFloat32:
      return launch_forward<Act, float>(out, x, rows, d, stream);
    case kFloat16:
      return launch_forward<Act, __half>(out, x, rows, d, stream);
    case kBFloat16:
      return launch_forward<Act, __nv_bfloat16>(out, x, rows, d, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

template <typename Act>
cudaError_t dispatch_backward(void* grad_x, const void* grad_out, const void* x, int64_t rows,
                              int64_t d, int dtype, cudaStream_t stream) {
  if (rows < 0 || d < 0) return cudaErrorInvalidValue;
  if (rows == 0 || d == 0) return cudaSuccess;
  switch (dtype) {
    case kFloat32:
      return launch_backward<Act, float>(grad_x, grad_out, x, rows, d, stream);
    case kFloat16:
      return launch_backward<Act, __half>(grad_x, grad_out, x, rows, d, stream);
    case kBFloat16:
      return launch_backward<Act, __nv_bfloat16>(grad_x, grad_out, x, rows, d, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t silu_and_mul_launch(void* out, const void* x, int64_t rows, int64_t d, int dtype,
                                cudaStream_t stream) {
  return dispatch_forward<Silu>(out, x, rows, d, dtype, stream);
}

cudaError_t gelu_and_mul_launch(void* out, const void* x, int64_t rows, int64_t d, int dtype,
                                cudaStream_t stream) {
  return dispatch_forward<GeluErf>(out, x, rows, d, dtype, stream);
}

cudaError_t gelu_tanh_and_mul_launch(void* out, const void* x, int64_t rows, int64_t d, int dtype,
                                     cudaStream_t stream) {
  return dispatch_forward<GeluTanh>(out, x, rows, d, dtype, stream);
}

cudaError_t silu_and_mul_backward_launch(void* grad_x, const void* grad_out, const void* x,
                                         int64_t rows, int64_t d, int dtype, cudaStream_t stream) {
  return dispatch_backward<Silu>(grad_x, grad_out, x, rows, d, dtype, stream);
}

cudaError_t gelu_and_mul_backward_launch(void* grad_x, const void* grad_out, const void* x,
                                         int64_t rows, int64_t d, int dtype, cudaStream_t stream) {
  return dispatch_backward<GeluErf>(grad_x, grad_out, x, rows, d, dtype, stream);
}

cudaError_t gelu_tanh_and_mul_backward_launch(void* grad_x, const void* grad_out, const void* x,
                                              int64_t rows, int64_t d, int dtype,
                                              cudaStream_t stream) {
  return dispatch_backward<GeluTanh>(grad_x, grad_out, x, rows, d, dtype, stream);
}

}  // namespace activation_kernels
