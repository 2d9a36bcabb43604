// CPU loops for the gated activations: convert to float, compute, round once on store.
// Rows are split across ATen's intra-op thread pool; within a row, chunks of kChunk elements are
// converted to float, run through branch-free math the compiler vectorises, and converted back;
// the row loops exist for the baseline, AVX2 and AVX-512, and the CPU picks one (see "one copy of
// the row loops per instruction set" below). See activation_cpu.h for the layout.
#include "activation_cpu.h"

// Stable-ABI headers only (the variant is built with [torch] stable-abi): parallel_for goes
// through the stable C shim, Half and BFloat16 are header-only.
#include <torch/csrc/stable/ops.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Half.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace activation_kernels {
namespace {

// ---- branch-free float math ---------------------------------------------------------------------
// No libm calls in the inner loops, so the compiler vectorises them (libm's expf/erff/tanhf are
// scalar calls and made these loops several times slower than torch's eager ops).

// Float compares are avoided on purpose: GCC (without -fno-trapping-math) will not if-convert a
// float compare that could trap on NaN, and turns std::min/std::max clamps into slow case splits.
// Clamps, floors and sign selects below are done with integer arithmetic on the bits instead.

inline int32_t bits_of(float x) {
  int32_t i;
  std::memcpy(&i, &x, sizeof(i));
  return i;
}

inline float float_of(int32_t i) {
  float x;
  std::memcpy(&x, &i, sizeof(x));
  return x;
}

// x with its magnitude clamped to limit (limit > 0); NaN becomes +-limit.
inline float clamp_abs(float x, float limit) {
  const int32_t xi = bits_of(x);
  const int32_t mag = xi & 0x7fffffff;
  const int32_t lim = bits_of(limit);
  return float_of((mag < lim ? mag : lim) | (xi & static_cast<int32_t>(0x80000000u)));
}

// x >= +0 ? if_pos : if_neg, by x's sign bit.
inline float select_by_sign(float x, float if_pos, float if_neg) {
  const int32_t mask = bits_of(x) >> 31;  // all ones when the sign bit is set
  return float_of((bits_of(if_pos) & ~mask) | (bits_of(if_neg) & mask));
}

// e^x, Cephes' expf (a degree-6 polynomial after range reduction), within ~2 ulp for
// |x| <= 87; larger |x| is clamped to 87, which keeps 2^n a normal float.
inline float exp_f(float x) {
  x = clamp_abs(x, 87.0f);
  // n = floor(x / ln 2 + 0.5); the argument is in [-125, 126], so shift it positive and truncate.
  const int n = static_cast<int>(x * 1.44269504088896341f + 128.5f) - 128;
  const float fn = static_cast<float>(n);
  const float r = (x - fn * 0.693359375f) - fn * -2.12194440e-4f;  // x - n ln 2, in two parts
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  return e * float_of((n + 127) << 23);  // e^r * 2^n
}

// erfc(x) (Numerical Recipes' erfcc: relative error < 1.2e-7 for all x). Gives the normal CDF
// as 0.5 * erfc(-a / sqrt 2) without the cancellation of 1 + erf(a / sqrt 2) for negative a.
inline float erfc_f(float x) {
  const float z = std::fabs(x);
  const float t = 1.0f / (1.0f + 0.5f * z);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  const float r = t * exp_f(p - z * z);
  return select_by_sign(x, r, 2.0f - r);
}

struct Silu {
  static float fwd(float a) { return a / (1.0f + exp_f(-a)); }
  static void fwd_bwd(float a, float& f, float& df) {
    const float s = 1.0f / (1.0f + exp_f(-a));
    f = a * s;
    df = s * (1.0f + a * (1.0f - s));
  }
};

struct GeluErf {
  static constexpr float kMinusSqrt1_2 = -0.70710678118654752f;  // -1 / sqrt(2)
  static constexpr float kInvSqrt2Pi = 0.39894228040143268f;     // 1 / sqrt(2 pi)
  static float fwd(float a) { return 0.5f * a * erfc_f(a * kMinusSqrt1_2); }
  static void fwd_bwd(float a, float& f, float& df) {
    const float cdf = 0.5f * erfc_f(a * kMinusSqrt1_2);
    f = a * cdf;
    df = cdf + a * kInvSqrt2Pi * exp_f(-0.5f * a * a);
  }
};

// gelu_tanh(a) = 0.5 a (1 + tanh u) = a * sigmoid(2u) with u = sqrt(2/pi) (a + 0.044715 a^3).
// With e = e^{2u}: 0.5 (1 + tanh u) = e / (1 + e) and 0.5 (1 - tanh^2 u) = 2 e / (1 + e)^2, which
// avoids the cancellation of 1 + tanh u and 1 - tanh^2 u for large |u|.
struct GeluTanh {
  static constexpr float kSqrt2OverPi = 0.79788456080286536f;  // sqrt(2 / pi)
  static constexpr float kCoeff = 0.044715f;
  static constexpr float kMaxU = 20.0f;  // tanh(20) == 1 in float
  static float sigmoid_2u(float a, float& inv) {
    const float u = clamp_abs(kSqrt2OverPi * (a + kCoeff * a * a * a), kMaxU);
    const float e = exp_f(2.0f * u);
    inv = 1.0f / (1.0f + e);
    return e * inv;
  }
  static float fwd(float a) {
    float inv;
    return a * sigmoid_2u(a, inv);
  }
  static void fwd_bwd(float a, float& f, float& df) {
    float inv;
    const float s = sigmoid_2u(a, inv);
    f = a * s;
    df = s + 2.0f * a * s * inv * kSqrt2OverPi * (1.0f + 3.0f * kCoeff * a * a);
  }
};

// ---- loops ----------------------------------------------------------------------------------------

// Elements per chunk: a row is converted to float a chunk at a time, computed, converted back.
constexpr int64_t kChunk = 256;

// Rows per task: aim for ~16K elements of work per task so small inputs stay single-threaded.
int64_t grain_rows(int64_t d) {
  const int64_t g = (int64_t{1} << 14) / (d > 0 ? d : 1);
  return g > 0 ? g : 1;
}

template <typename Act, typename T>
[[gnu::always_inline]] inline void forward_row(T* __restrict__ out, const T* __restrict__ a,
                                               const T* __restrict__ b, int64_t d) {
  float fa[kChunk], fb[kChunk];
  for (int64_t j0 = 0; j0 < d; j0 += kChunk) {
    const int64_t n = std::min(kChunk, d - j0);
    for (int64_t j = 0; j < n; ++j) {
      fa[j] = static_cast<float>(a[j0 + j]);
      fb[j] = static_cast<float>(b[j0 + j]);
    }
    for (int64_t j = 0; j < n; ++j) fa[j] = Act::fwd(fa[j]) * fb[j];
    for (int64_t j = 0; j < n; ++j) out[j0 + j] = static_cast<T>(fa[j]);
  }
}

template <typename Act, typename T>
[[gnu::always_inline]] inline void backward_row(T* __restrict__ ga, T* __restrict__ gb,
                                                const T* __restrict__ g, const T* __restrict__ a,
                                                const T* __restrict__ b, int64_t d) {
  float fa[kChunk], fb[kChunk], fg[kChunk];
  for (int64_t j0 = 0; j0 < d; j0 += kChunk) {
    const int64_t n = std::min(kChunk, d - j0);
    for (int64_t j = 0; j < n; ++j) {
      fa[j] = static_cast<float>(a[j0 + j]);
      fb[j] = static_cast<float>(b[j0 + j]);
      fg[j] = static_cast<float>(g[j0 + j]);
    }
    for (int64_t j = 0; j < n; ++j) {
      float f, df;
      Act::fwd_bwd(fa[j], f, df);
      fa[j] = fg[j] * fb[j] * df;  // grad of a
      fb[j] = fg[j] * f;           // grad of b
    }
    for (int64_t j = 0; j < n; ++j) {
      ga[j0 + j] = static_cast<T>(fa[j]);
      gb[j0 + j] = static_cast<T>(fb[j]);
    }
  }
}

// ---- one copy of the row loops per instruction set, picked at run time ---------------------------
// The library is built for the x86-64 baseline (SSE2: 4 floats a vector), which no manylinux
// policy lets it exceed, while torch's own eager ops dispatch to AVX2 or AVX-512. So the row
// loops are compiled again for AVX2+FMA and for AVX-512 (the row functions above are inlined
// into each copy and vectorised for its target) and the CPU picks one when first asked.

#define ACTIVATION_ROW_LOOPS(NAME, TARGET)                                                          \
  template <typename Act, typename T>                                                              \
  TARGET void forward_rows_##NAME(T* o, const T* in, int64_t begin, int64_t end, int64_t d) {      \
    for (int64_t r = begin; r < end; ++r) {                                                        \
      forward_row<Act, T>(o + r * d, in + r * 2 * d, in + r * 2 * d + d, d);                       \
    }                                                                                              \
  }                                                                                                \
  template <typename Act, typename T>                                                              \
  TARGET void backward_rows_##NAME(T* gx, const T* g, const T* in, int64_t begin, int64_t end,     \
                                   int64_t d) {                                                    \
    for (int64_t r = begin; r < end; ++r) {                                                        \
      backward_row<Act, T>(gx + r * 2 * d, gx + r * 2 * d + d, g + r * d, in + r * 2 * d,          \
                           in + r * 2 * d + d, d);                                                 \
    }                                                                                              \
  }

ACTIVATION_ROW_LOOPS(baseline, )
#if defined(__x86_64__) && defined(__GNUC__)
ACTIVATION_ROW_LOOPS(avx2, __attribute__((target("avx2,fma"))))
ACTIVATION_ROW_LOOPS(avx512, __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma"))))
#endif

enum class Isa { baseline, avx2, avx512 };

// ACTIVATION_CPU_ISA=baseline|avx2|avx512 caps the choice (to test or time each copy on one machine).
Isa host_isa() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const Isa isa = [] {
    const char* cap = std::getenv("ACTIVATION_CPU_ISA");
    const std::string want = cap ? cap : "";
    if (!want.empty() && want != "baseline" && want != "avx2" && want != "avx512") {
      throw std::invalid_argument("ACTIVATION_CPU_ISA: expected baseline, avx2 or avx512, got '" + want + "'");
    }
    __builtin_cpu_init();
    if (want != "baseline" && want != "avx2" && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq")) {
      return Isa::avx512;
    }
    if (want != "baseline" && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      return Isa::avx2;
    }
    return Isa::baseline;
  }();
  return isa;
#else
  return Isa::baseline;
#endif
}

template <typename Act, typename T>
void forward(void* out, const void* x, int64_t rows, int64_t d) {
  T* o = static_cast<T*>(out);
  const T* in = static_cast<const T*>(x);
  const Isa isa = host_isa();
  torch::stable::parallel_for(0, rows, grain_rows(d), [&](int64_t begin, int64_t end) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (isa == Isa::avx512) return forward_rows_avx512<Act, T>(o, in, begin, end, d);
    if (isa == Isa::avx2) return forward_rows_avx2<Act, T>(o, in, begin, end, d);
#endif
    forward_rows_baseline<Act, T>(o, in, begin, end, d);
  });
}

template <typename Act, typename T>
void backward(void* grad_x, const void* grad_out, const void* x, int64_t rows, int64_t d) {
  T* gx = static_cast<T*>(grad_x);
  const T* g = static_cast<const T*>(grad_out);
  const T* in = static_cast<const T*>(x);
  const Isa isa = host_isa();
  torch::stable::parallel_for(0, rows, grain_rows(2 * d), [&](int64_t begin, int64_t end) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (isa == Isa::avx512) return backward_rows_avx512<Act, T>(gx, g, in, begin, end, d);
    if (isa == Isa::avx2) return backward_rows_avx2<Act, T>(gx, g, in, begin, end, d);
#endif
    backward_rows_baseline<Act, T>(gx, g, in, begin, end, d);
  });
}

[[noreturn]] void bad_dtype(int dtype) {
  throw std::invalid_argument("activation_cpu: unsupported dtype code " + std::to_string(dtype));
}

template <typename Act>
void dispatch_forward(void* out, const void* x, int64_t rows, int64_t d, int dtype) {
  if (rows <= 0 || d <= 0) return;
  switch (dtype) {
    case 0:
      return forward<Act, float>(out, x, rows, d);
    case 1:
      return forward<Act, torch::headeronly::Half>(out, x, rows, d);
    case 2:
      return forward<Act, torch::headeronly::BFloat16>(out, x, rows, d);
    default:
      bad_dtype(dtype);
  }
}

template <typename Act>
void dispatch_backward(void* grad_x, const void* grad_out, const void* x, int64_t rows, int64_t d,
                       int dtype) {
  if (rows <= 0 || d <= 0) return;
  switch (dtype) {
    case 0:
      return backward<Act, float>(grad_x, grad_out, x, rows, d);
    case 1:
      return backward<Act, torch::headeronly::Half>(grad_x, grad_out, x, rows, d);
    case 2:
      return backward<Act, torch::headeronly::BFloat16>(grad_x, grad_out, x, rows, d);
    default:
      bad_dtype(dtype);
  }
}

}  // namespace

void silu_and_mul_cpu(void* out, const void* x, int64_t rows, int64_t d, int dtype) {
  dispatch_forward<Silu>(out, x, rows, d, dtype);
}

void gelu_and_mul_cpu(void* out, const void* x, int64_t rows, int64_t d, int dtype) {
  dispatch_forward<GeluErf>(out, x, rows, d, dtype);
}

void gelu_tanh_and_mul_cpu(void* out, const void* x, int64_t rows, int64_t d, int dtype) {
  dispatch_forward<GeluTanh>(out, x, rows, d, dtype);
}

void silu_and_mul_backward_cpu(void* grad_x, const void* grad_out, const void* x, int64_t rows,
                               int64_t d, int dtype) {
  dispatch_backward<Silu>(grad_x, grad_out, x, rows, d, dtype);
}

void gelu_and_mul_backward_cpu(void* grad_x, const void* grad_out, const void* x, int64_t rows,
                               int64_t d, int dtype) {
  dispatch_backward<GeluErf>(grad_x, grad_out, x, rows, d, dtype);
}

void gelu_tanh_and_mul_backward_cpu(void* grad_x, const void* grad_out, const void* x,
                                    int64_t rows, int64_t d, int dtype) {
  dispatch_backward<GeluTanh>(grad_x, grad_out, x, rows, d, dtype);
}

}  // namespace activation_kernels
