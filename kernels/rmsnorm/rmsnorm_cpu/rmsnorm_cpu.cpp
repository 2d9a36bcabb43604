// CPU RMSNorm: rows in parallel (at::parallel_for), float32 accumulation. grad_weight is summed
// per fixed chunk of rows and then over chunks in order, so it does not depend on thread count.
#include "rmsnorm_cpu.h"

#include <ATen/Parallel.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace rmsnorm_cpu {
namespace {

constexpr int64_t kMaxChunks = 64;   // grad_weight partial sums
constexpr int64_t kGrainElems = 1 << 15;

int64_t grain_rows(int64_t hidden) {
  return std::max<int64_t>(1, kGrainElems / std::max<int64_t>(hidden, 1));
}

float rstd_of(const float* v, int64_t hidden, float eps) {
  // Four partial sums: vectorisable without reassociation flags, and more accurate.
  float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  int64_t j = 0;
  for (; j + 4 <= hidden; j += 4) {
    for (int k = 0; k < 4; ++k) s[k] += v[j + k] * v[j + k];
  }
  for (; j < hidden; ++j) s[0] += v[j] * v[j];
  const float mean = ((s[0] + s[1]) + (s[2] + s[3])) / static_cast<float>(hidden);
  return 1.0f / std::sqrt(mean + eps);
}

template <typename T>
void forward(T* out, T* residual_out, const T* x, const T* residual, const T* weight, int64_t rows,
             int64_t hidden, float eps) {
  std::vector<float> w(hidden);
  for (int64_t j = 0; j < hidden; ++j) w[j] = static_cast<float>(weight[j]);
  at::parallel_for(0, rows, grain_rows(hidden), [&](int64_t begin, int64_t end) {
    std::vector<float> v(hidden);
    for (int64_t r = begin; r < end; ++r) {
      const T* xr = x + r * hidden;
      if (residual != nullptr) {
        const T* rr = residual + r * hidden;
        T* ro = residual_out + r * hidden;
        for (int64_t j = 0; j < hidden; ++j) {
          const T s = static_cast<T>(static_cast<float>(xr[j]) + static_cast<float>(rr[j]));
          ro[j] = s;
          v[j] = static_cast<float>(s);
        }
      } else {
        for (int64_t j = 0; j < hidden; ++j) v[j] = static_cast<float>(xr[j]);
      }
      const float rstd = rstd_of(v.data(), hidden, eps);
      T* o = out + r * hidden;
      for (int64_t j = 0; j < hidden; ++j) o[j] = static_cast<T>(v[j] * rstd * w[j]);
    }
  });
}

template <typename T>
void backward(T* grad_x, T* grad_weight, const T* grad_out, const T* grad_add, const T* x,
              const T* weight, int64_t rows, int64_t hidden, float eps) {
  std::vector<float> w(hidden);
  for (int64_t j = 0; j < hidden; ++j) w[j] = static_cast<float>(weight[j]);
  const int64_t chunks = std::min(rows, kMaxChunks);
  const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  std::vector<float> partial(static_cast<size_t>(chunks * hidden), 0.0f);
  at::parallel_for(0, chunks, 1, [&](int64_t cbegin, int64_t cend) {
    std::vector<float> xv(hidden), gv(hidden);
    for (int64_t c = cbegin; c < cend; ++c) {
      float* dw = partial.data() + c * hidden;
      const int64_t rend = std::min(rows, (c + 1) * rows_per_chunk);
      for (int64_t r = c * rows_per_chunk; r < rend; ++r) {
        const T* xr = x + r * hidden;
        const T* gr = grad_out + r * hidden;
        float dot = 0.0f;
        for (int64_t j = 0; j < hidden; ++j) {
          xv[j] = static_cast<float>(xr[j]);
          gv[j] = static_cast<float>(gr[j]);
          dot += gv[j] * w[j] * xv[j];
        }
        const float rstd = rstd_of(xv.data(), hidden, eps);
        const float c3 = dot / static_cast<float>(hidden) * rstd * rstd * rstd;
        T* gx = grad_x + r * hidden;
        const T* ga = grad_add != nullptr ? grad_add + r * hidden : nullptr;
        for (int64_t j = 0; j < hidden; ++j) {
          float g = gv[j] * w[j] * rstd - xv[j] * c3;
          if (ga != nullptr) g += static_cast<float>(ga[j]);
          gx[j] = static_cast<T>(g);
          dw[j] += gv[j] * xv[j] * rstd;
        }
      }
    }
  });
  for (int64_t j = 0; j < hidden; ++j) {
    float s = 0.0f;
    for (int64_t c = 0; c < chunks; ++c) s += partial[c * hidden + j];
    grad_weight[j] = static_cast<T>(s);
  }
}

template <typename F>
bool dispatch(int dtype, F&& f) {
  switch (dtype) {
    case kFloat32: f(float{}); return true;
    case kFloat16: f(c10::Half{}); return true;
    case kBFloat16: f(c10::BFloat16{}); return true;
    default: return false;
  }
}

}  // namespace

bool rms_norm_forward(void* out, void* residual_out, const void* x, const void* residual,
                      const void* weight, int64_t rows, int64_t hidden, float eps, int dtype) {
  if (rows < 0 || hidden < 0 || (residual == nullptr) != (residual_out == nullptr)) return false;
  return dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (rows == 0 || hidden == 0) return;
    forward<T>(static_cast<T*>(out), static_cast<T*>(residual_out), static_cast<const T*>(x),
               static_cast<const T*>(residual), static_cast<const T*>(weight), rows, hidden, eps);
  });
}

bool rms_norm_backward(void* grad_x, void* grad_weight, const void* grad_out, const void* grad_add,
                       const void* x, const void* weight, int64_t rows, int64_t hidden, float eps,
                       int dtype) {
  if (rows < 0 || hidden < 0) return false;
  return dispatch(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (hidden == 0) return;
    if (rows == 0) {
      std::fill_n(static_cast<T*>(grad_weight), hidden, T(0.0f));
      return;
    }
    backward<T>(static_cast<T*>(grad_x), static_cast<T*>(grad_weight),
                static_cast<const T*>(grad_out), static_cast<const T*>(grad_add),
                static_cast<const T*>(x), static_cast<const T*>(weight), rows, hidden, eps);
  });
}

}  // namespace rmsnorm_cpu
