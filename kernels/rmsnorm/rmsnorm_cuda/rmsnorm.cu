// RMSNorm and fused add + RMSNorm, forward and backward. No torch headers: the binding checks
// tensors, allocates outputs and the workspace, and calls the launchers declared in rmsnorm.cuh.
//
// Rows are independent, so each row is handled by `tx` threads of a block shaped (tx, ty): ty rows
// per block, so narrow rows still fill a block. A thread moves 16-byte packs (8 halves or 4
// floats) when the row length and the pointers allow it, else single elements. When a row fits
// (ITEMS packs per thread), it is read once into registers, reduced, and written; longer rows are
// read twice (ITEMS == 0), the second time mostly from L1/L2.
//
// Backward: blocks stride over rows; each thread adds grad_out * x * rstd for its columns into
// float32 registers across its rows, and stores them as one row of a [parts, hidden] workspace
// (parts = blocks * ty). A second kernel sums the workspace over parts into grad_weight, so the
// result is deterministic for a given device.
#include "rmsnorm.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cstdint>
#include <vector>

namespace rmsnorm_kernels {
namespace {

constexpr int kBlockThreads = 256;   // threads of a block whose rows fit in registers
constexpr int kMaxReduceRows = 4;    // rows per block when a row spans more than one warp
constexpr int kReduceRows = 8;       // partial-sum rows read at once by the grad_weight reduce

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

template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

// ---- reductions ------------------------------------------------------------------------------

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sums each v[k] over the blockDim.x threads of one row (same threadIdx.y); every thread gets the
// totals. blockDim.x is a multiple of 32, and at most kMaxReduceRows rows share a block when
// blockDim.x > 32. All threads of the block must call it (it synchronises the block).
template <int K>
__device__ __forceinline__ void row_sum(float (&v)[K], float* smem) {
#pragma unroll
  for (int k = 0; k < K; ++k) v[k] = warp_sum(v[k]);
  if (blockDim.x == 32) return;
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  const int warps = blockDim.x >> 5;
  float* s = smem + threadIdx.y * 32 * K;
  if (lane == 0) {
#pragma unroll
    for (int k = 0; k < K; ++k) s[warp * K + k] = v[k];
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < K; ++k) v[k] = warp_sum(lane < warps ? s[lane * K + k] : 0.0f);
  __syncthreads();  // the next row may reuse smem
}

template <int ITEMS>
constexpr int fwd_max_threads() {
  return ITEMS == 0 ? 1024 : (ITEMS >= 8 ? 512 : kBlockThreads);
}

template <int ITEMS>
constexpr int bwd_max_threads() {
  return ITEMS == 0 ? 1024 : kBlockThreads;
}

// ---- forward ---------------------------------------------------------------------------------

template <typename T, int VEC>
__device__ __forceinline__ Pack<T, VEC> add_rounded(const Pack<T, VEC>& a, const Pack<T, VEC>& b) {
  Pack<T, VEC> r;
#pragma unroll
  for (int k = 0; k < VEC; ++k) r.v[k] = from_float<T>(to_float(a.v[k]) + to_float(b.v[k]));
  return r;
}

template <typename T, int VEC, int ITEMS>
__global__ void __launch_bounds__(fwd_max_threads<ITEMS>())
    rms_norm_fwd_kernel(T* __restrict__ out, T* __restrict__ residual_out,
                        const T* __restrict__ x, const T* __restrict__ residual,
                        const T* __restrict__ weight, int64_t rows, int hidden, float eps) {
  using P = Pack<T, VEC>;
  __shared__ float smem[kMaxReduceRows * 32];
  const int nvec = hidden / VEC;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  const bool valid = row < rows;
  const int64_t offset = valid ? row * hidden : 0;
  const bool fused = residual != nullptr;
  const P* xr = reinterpret_cast<const P*>(x + offset);
  const P* rr = fused ? reinterpret_cast<const P*>(residual + offset) : nullptr;
  P* ror = fused ? reinterpret_cast<P*>(residual_out + offset) : nullptr;
  P* outr = reinterpret_cast<P*>(out + offset);
  const P* wr = reinterpret_cast<const P*>(weight);
  const float inv_hidden = 1.0f / static_cast<float>(hidden);
  float ss[1] = {0.0f};

  if constexpr (ITEMS > 0) {
    float v[ITEMS][VEC];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int j = threadIdx.x + i * blockDim.x;
      if (valid && j < nvec) {
        P p = xr[j];
        if (fused) {
          p = add_rounded(p, rr[j]);
          ror[j] = p;
        }
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          v[i][k] = to_float(p.v[k]);
          ss[0] += v[i][k] * v[i][k];
        }
      }
    }
    row_sum(ss, smem);
    const float rstd = rsqrtf(ss[0] * inv_hidden + eps);
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int j = threadIdx.x + i * blockDim.x;
      if (valid && j < nvec) {
        const P w = wr[j];
        P o;
#pragma unroll
        for (int k = 0; k < VEC; ++k) o.v[k] = from_float<T>(v[i][k] * rstd * to_float(w.v[k]));
        outr[j] = o;
      }
    }
  } else {
    for (int j = threadIdx.x; valid && j < nvec; j += blockDim.x) {
      P p = xr[j];
      if (fused) {
        p = add_rounded(p, rr[j]);
        ror[j] = p;
      }
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const float f = to_float(p.v[k]);
        ss[0] += f * f;
      }
    }
    row_sum(ss, smem);
    const float rstd = rsqrtf(ss[0] * inv_hidden + eps);
    for (int j = threadIdx.x; valid && j < nvec; j += blockDim.x) {
      // Recomputed from the inputs (not re-read from residual_out, which this kernel writes).
      P p = xr[j];
      if (fused) p = add_rounded(p, rr[j]);
      const P w = wr[j];
      P o;
#pragma unroll
      for (int k = 0; k < VEC; ++k) o.v[k] = from_float<T>(to_float(p.v[k]) * rstd * to_float(w.v[k]));
      outr[j] = o;
    }
  }
}

// ---- backward --------------------------------------------------------------------------------

// Rows that fit in registers: x and grad_out stay in registers as packs of T (not floats: fewer
// registers, more resident blocks; prefetching the next row measured slower on an H200).
template <typename T, int VEC, int ITEMS>
__device__ __forceinline__ void load_rows(Pack<T, VEC> (&xs)[ITEMS], Pack<T, VEC> (&gs)[ITEMS],
                                          const T* __restrict__ x, const T* __restrict__ grad_out,
                                          int64_t row, int64_t rows, int hidden) {
  using P = Pack<T, VEC>;
  if (row >= rows) return;
  const P* xr = reinterpret_cast<const P*>(x + row * hidden);
  const P* gr = reinterpret_cast<const P*>(grad_out + row * hidden);
  const int nvec = hidden / VEC;
#pragma unroll
  for (int i = 0; i < ITEMS; ++i) {
    const int j = threadIdx.x + i * blockDim.x;
    if (j < nvec) {
      xs[i] = xr[j];
      gs[i] = gr[j];
    }
  }
}

template <typename T, int VEC, int ITEMS>
__global__ void __launch_bounds__(bwd_max_threads<ITEMS>())
    rms_norm_bwd_kernel(T* __restrict__ grad_x, float* __restrict__ partial,
                        const T* __restrict__ grad_out, const T* __restrict__ grad_add,
                        const T* __restrict__ x, const T* __restrict__ weight, int64_t rows,
                        int hidden, float eps) {
  using P = Pack<T, VEC>;
  using F = Pack<float, VEC>;
  __shared__ float smem[kMaxReduceRows * 32 * 2];
  const int nvec = hidden / VEC;
  const int64_t slot = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  F* part = reinterpret_cast<F*>(partial + slot * hidden);
  const P* wr = reinterpret_cast<const P*>(weight);
  const bool has_add = grad_add != nullptr;
  const float inv_hidden = 1.0f / static_cast<float>(hidden);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.y;
  // r0 is the same for the whole block, so every thread runs the same iterations (row_sum syncs).
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.y;

  if constexpr (ITEMS > 0) {
    float dw[ITEMS][VEC];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
#pragma unroll
      for (int k = 0; k < VEC; ++k) dw[i][k] = 0.0f;
    for (int64_t r0 = first; r0 < rows; r0 += step) {
      const int64_t row = r0 + threadIdx.y;
      const bool valid = row < rows;
      P xp[ITEMS], gp[ITEMS];
      load_rows(xp, gp, x, grad_out, row, rows, hidden);
      float s[2] = {0.0f, 0.0f};  // sum x^2, sum grad_out * weight * x
#pragma unroll
      for (int i = 0; i < ITEMS; ++i) {
        const int j = threadIdx.x + i * blockDim.x;
        if (valid && j < nvec) {
          const P pw = wr[j];
#pragma unroll
          for (int k = 0; k < VEC; ++k) {
            const float xf = to_float(xp[i].v[k]);
            s[0] += xf * xf;
            s[1] += to_float(gp[i].v[k]) * to_float(pw.v[k]) * xf;
          }
        }
      }
      row_sum(s, smem);
      const float rstd = rsqrtf(s[0] * inv_hidden + eps);
      const float c = s[1] * inv_hidden * rstd * rstd * rstd;
      if (valid) {
        const int64_t offset = row * hidden;
        const P* ar = has_add ? reinterpret_cast<const P*>(grad_add + offset) : nullptr;
        P* gxr = reinterpret_cast<P*>(grad_x + offset);
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
          const int j = threadIdx.x + i * blockDim.x;
          if (j < nvec) {
            const P pw = wr[j];
            P pa;
            if (has_add) pa = ar[j];
            P o;
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
              const float xf = to_float(xp[i].v[k]);
              const float gf = to_float(gp[i].v[k]);
              float g = gf * to_float(pw.v[k]) * rstd - xf * c;
              if (has_add) g += to_float(pa.v[k]);
              o.v[k] = from_float<T>(g);
              dw[i][k] += gf * xf * rstd;
            }
            gxr[j] = o;
          }
        }
      }
    }
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
      const int j = threadIdx.x + i * blockDim.x;
      if (j < nvec) {
        F f;
#pragma unroll
        for (int k = 0; k < VEC; ++k) f.v[k] = dw[i][k];
        part[j] = f;
      }
    }
  } else {
    // Long rows: two passes; this slot's row of the workspace (zeroed by the launcher) holds the
    // grad_weight sums.
    for (int64_t r0 = first; r0 < rows; r0 += step) {
      const int64_t row = r0 + threadIdx.y;
      const bool valid = row < rows;
      const int64_t offset = valid ? row * hidden : 0;
      const P* xr = reinterpret_cast<const P*>(x + offset);
      const P* gr = reinterpret_cast<const P*>(grad_out + offset);
      const P* ar = has_add ? reinterpret_cast<const P*>(grad_add + offset) : nullptr;
      P* gxr = reinterpret_cast<P*>(grad_x + offset);
      float s[2] = {0.0f, 0.0f};
      for (int j = threadIdx.x; valid && j < nvec; j += blockDim.x) {
        const P px = xr[j];
        const P pg = gr[j];
        const P pw = wr[j];
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          const float xf = to_float(px.v[k]);
          s[0] += xf * xf;
          s[1] += to_float(pg.v[k]) * to_float(pw.v[k]) * xf;
        }
      }
      row_sum(s, smem);
      const float rstd = rsqrtf(s[0] * inv_hidden + eps);
      const float c = s[1] * inv_hidden * rstd * rstd * rstd;
      for (int j = threadIdx.x; valid && j < nvec; j += blockDim.x) {
        const P px = xr[j];
        const P pg = gr[j];
        const P pw = wr[j];
        P pa;
        if (has_add) pa = ar[j];
        F acc = part[j];
        P o;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
          const float xf = to_float(px.v[k]);
          const float gf = to_float(pg.v[k]);
          float g = gf * to_float(pw.v[k]) * rstd - xf * c;
          if (has_add) g += to_float(pa.v[k]);
          o.v[k] = from_float<T>(g);
          acc.v[k] += gf * xf * rstd;
        }
        gxr[j] = o;
        part[j] = acc;
      }
    }
  }
}

// grad_weight[c] = sum over p of partial[p, c]; block (32, kReduceRows), 32 columns per block.
template <typename T>
__global__ void __launch_bounds__(32 * kReduceRows)
    grad_weight_reduce_kernel(T* __restrict__ grad_weight, const float* __restrict__ partial,
                              int parts, int hidden) {
  __shared__ float s[kReduceRows][33];
  const int col = blockIdx.x * 32 + threadIdx.x;
  float acc = 0.0f;
  if (col < hidden) {
    for (int p = threadIdx.y; p < parts; p += kReduceRows) {
      acc += partial[static_cast<int64_t>(p) * hidden + col];
    }
  }
  s[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < hidden) {
    float total = 0.0f;
#pragma unroll
    for (int y = 0; y < kReduceRows; ++y) total += s[y][threadIdx.x];
    grad_weight[col] = from_float<T>(total);
  }
}

// ---- host side: kernel choice ----------------------------------------------------------------

using Kernel = const void*;

template <typename T, int VEC>
Kernel fwd_kernel_for(int items) {
  switch (items) {
    case 0: return reinterpret_cast<Kernel>(&rms_norm_fwd_kernel<T, VEC, 0>);
    case 1: return reinterpret_cast<Kernel>(&rms_norm_fwd_kernel<T, VEC, 1>);
    case 2: return reinterpret_cast<Kernel>(&rms_norm_fwd_kernel<T, VEC, 2>);
    case 4: return reinterpret_cast<Kernel>(&rms_norm_fwd_kernel<T, VEC, 4>);
    case 8: return reinterpret_cast<Kernel>(&rms_norm_fwd_kernel<T, VEC, 8>);
    default: return nullptr;
  }
}

template <typename T, int VEC>
Kernel bwd_kernel_for(int items) {
  switch (items) {
    case 0: return reinterpret_cast<Kernel>(&rms_norm_bwd_kernel<T, VEC, 0>);
    case 1: return reinterpret_cast<Kernel>(&rms_norm_bwd_kernel<T, VEC, 1>);
    case 2: return reinterpret_cast<Kernel>(&rms_norm_bwd_kernel<T, VEC, 2>);
    case 4: return reinterpret_cast<Kernel>(&rms_norm_bwd_kernel<T, VEC, 4>);
    default: return nullptr;
  }
}

template <typename T>
Kernel kernel_for(bool backward, bool packed, int items) {
  constexpr int kPack = 16 / sizeof(T);
  if (backward) return packed ? bwd_kernel_for<T, kPack>(items) : bwd_kernel_for<T, 1>(items);
  return packed ? fwd_kernel_for<T, kPack>(items) : fwd_kernel_for<T, 1>(items);
}

Kernel kernel_for(int dtype, bool backward, bool packed, int items) {
  switch (dtype) {
    case kFloat32: return kernel_for<float>(backward, packed, items);
    case kFloat16: return kernel_for<__half>(backward, packed, items);
    case kBFloat16: return kernel_for<__nv_bfloat16>(backward, packed, items);
    default: return nullptr;
  }
}

Kernel reduce_kernel_for(int dtype) {
  switch (dtype) {
    case kFloat32: return reinterpret_cast<Kernel>(&grad_weight_reduce_kernel<float>);
    case kFloat16: return reinterpret_cast<Kernel>(&grad_weight_reduce_kernel<__half>);
    case kBFloat16: return reinterpret_cast<Kernel>(&grad_weight_reduce_kernel<__nv_bfloat16>);
    default: return nullptr;
  }
}

int elem_size(int dtype) {
  switch (dtype) {
    case kFloat32: return 4;
    case kFloat16:
    case kBFloat16: return 2;
    default: return 0;
  }
}

struct Plan {
  bool packed = false;
  int items = 0;  // packs per thread held in registers; 0 = two passes over the row
  int tx = 32;    // threads across a row (a multiple of 32)
  int ty = 1;     // rows per block
  int64_t blocks = 0;
  Kernel kernel = nullptr;
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int round_up32(int64_t n) { return static_cast<int>(ceil_div(n, 32) * 32); }

// Threads per row and packs per thread: the fewest packs per thread that keep a row within
// kBlockThreads threads, then (forward only) 8 packs over up to 512 threads, else two passes.
void shape_plan(Plan& p, int64_t nvec, bool backward) {
  const int choices[] = {1, 2, 4, 8};
  const int max_items = backward ? 4 : 8;
  p.items = 0;
  if (nvec <= 32) {
    p.items = 1;
    p.tx = 32;
  } else {
    for (int items : choices) {
      if (items > max_items) break;
      const int tx = round_up32(ceil_div(nvec, items));
      if (tx <= kBlockThreads) {
        p.items = items;
        p.tx = tx;
        break;
      }
    }
    if (p.items == 0 && !backward && round_up32(ceil_div(nvec, 8)) <= 512) {
      p.items = 8;
      p.tx = round_up32(ceil_div(nvec, 8));
    }
    if (p.items == 0) p.tx = 1024;
  }
  p.ty = p.tx >= kBlockThreads ? 1 : kBlockThreads / p.tx;
  if (p.tx > 32 && p.ty > kMaxReduceRows) p.ty = kMaxReduceRows;
}

bool aligned16(const void* ptr) { return ptr == nullptr || reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

// Blocks of `kernel` at `threads` resident on the current device at once. Cached per thread: the
// occupancy query costs host time on every backward call otherwise (three queries a call).
cudaError_t resident_blocks(Kernel kernel, int threads, int64_t& resident) {
  struct Entry {
    int device;
    Kernel kernel;
    int threads;
    int64_t resident;
  };
  thread_local std::vector<Entry> cache;
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  for (const Entry& e : cache) {
    if (e.device == device && e.kernel == kernel && e.threads == threads) {
      resident = e.resident;
      return cudaSuccess;
    }
  }
  int sms = 0, per_sm = 0;
  err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err == cudaSuccess) err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, 0);
  if (err != cudaSuccess) return err;
  resident = static_cast<int64_t>(sms) * (per_sm > 0 ? per_sm : 1);
  cache.push_back({device, kernel, threads, resident});
  return cudaSuccess;
}

cudaError_t make_plan(Plan& p, int64_t rows, int64_t hidden, int dtype, bool backward,
                      bool pointers_aligned) {
  const int es = elem_size(dtype);
  if (es == 0 || rows < 0 || hidden < 0 || hidden > INT_MAX) return cudaErrorInvalidValue;
  const int pack = 16 / es;
  p.packed = pointers_aligned && hidden % pack == 0;
  const int64_t nvec = p.packed ? hidden / pack : hidden;
  shape_plan(p, nvec, backward);
  p.kernel = kernel_for(dtype, backward, p.packed, p.items);
  const int64_t row_blocks = ceil_div(rows, p.ty);
  if (!backward) {
    if (row_blocks > INT_MAX) return cudaErrorInvalidValue;
    p.blocks = row_blocks;
    return cudaSuccess;
  }
  // Backward: as many blocks as fit on the device at once, each striding over rows.
  int64_t resident = 0;
  const cudaError_t err = resident_blocks(p.kernel, p.tx * p.ty, resident);
  if (err != cudaSuccess) return err;
  p.blocks = row_blocks < resident ? row_blocks : resident;
  if (p.blocks < 1) p.blocks = 1;
  return cudaSuccess;
}

size_t workspace_bytes_for(const Plan& p, int64_t hidden) {
  return static_cast<size_t>(p.blocks) * p.ty * static_cast<size_t>(hidden) * sizeof(float);
}

}  // namespace

// ---- launchers -------------------------------------------------------------------------------

cudaError_t rms_norm_forward_launch(void* out, void* residual_out, const void* x,
                                    const void* residual, const void* weight, int64_t rows,
                                    int64_t hidden, float eps, int dtype, cudaStream_t stream) {
  if ((residual == nullptr) != (residual_out == nullptr)) return cudaErrorInvalidValue;
  if (elem_size(dtype) == 0) return cudaErrorInvalidValue;
  if (rows == 0 || hidden == 0) return cudaSuccess;
  const bool aligned = aligned16(out) && aligned16(residual_out) && aligned16(x) &&
                       aligned16(residual) && aligned16(weight);
  Plan p;
  cudaError_t err = make_plan(p, rows, hidden, dtype, /*backward=*/false, aligned);
  if (err != cudaSuccess) return err;
  int hidden_i = static_cast<int>(hidden);
  void* args[] = {&out, &residual_out, &x,
                  &residual, &weight,
                  &rows, &hidden_i, &eps};
  err = cudaLaunchKernel(p.kernel, dim3(static_cast<unsigned>(p.blocks)), dim3(p.tx, p.ty), args,
                         0, stream);
  return err == cudaSuccess ? cudaGetLastError() : err;
}

size_t rms_norm_backward_workspace_size(int64_t rows, int64_t hidden, int dtype) {
  if (rows <= 0 || hidden <= 0) return 0;
  size_t bytes = 0;
  for (bool aligned : {false, true}) {
    Plan p;
    if (make_plan(p, rows, hidden, dtype, /*backward=*/true, aligned) != cudaSuccess) return 0;
    const size_t b = workspace_bytes_for(p, hidden);
    if (b > bytes) bytes = b;
  }
  return bytes;
}

cudaError_t rms_norm_backward_launch(void* grad_x, void* grad_weight, void* workspace,
                                     size_t workspace_bytes, const void* grad_out,
                                     const void* grad_add, const void* x, const void* weight,
                                     int64_t rows, int64_t hidden, float eps, int dtype,
                                     cudaStream_t stream) {
  const int es = elem_size(dtype);
  if (es == 0 || rows < 0 || hidden < 0) return cudaErrorInvalidValue;
  if (hidden == 0) return cudaSuccess;
  if (rows == 0) return cudaMemsetAsync(grad_weight, 0, static_cast<size_t>(hidden) * es, stream);
  // Float packs of the workspace are 32-byte aligned types when halves are packed by 8.
  const bool aligned = aligned16(grad_x) && aligned16(grad_out) && aligned16(grad_add) &&
                       aligned16(x) && aligned16(weight) &&
                       reinterpret_cast<uintptr_t>(workspace) % 32 == 0;
  Plan p;
  cudaError_t err = make_plan(p, rows, hidden, dtype, /*backward=*/true, aligned);
  if (err != cudaSuccess) return err;
  const size_t need = workspace_bytes_for(p, hidden);
  if (workspace == nullptr || workspace_bytes < need) return cudaErrorInvalidValue;
  if (p.items == 0) {
    err = cudaMemsetAsync(workspace, 0, need, stream);
    if (err != cudaSuccess) return err;
  }
  float* partial = static_cast<float*>(workspace);
  int hidden_i = static_cast<int>(hidden);
  void* args[] = {&grad_x, &partial, &grad_out,
                  &grad_add, &x,
                  &weight, &rows, &hidden_i, &eps};
  err = cudaLaunchKernel(p.kernel, dim3(static_cast<unsigned>(p.blocks)), dim3(p.tx, p.ty), args,
                         0, stream);
  if (err == cudaSuccess) err = cudaGetLastError();
  if (err != cudaSuccess) return err;

  int parts = static_cast<int>(p.blocks * p.ty);
  const float* partial_c = partial;
  void* rargs[] = {&grad_weight, &partial_c, &parts, &hidden_i};
  err = cudaLaunchKernel(reduce_kernel_for(dtype),
                         dim3(static_cast<unsigned>(ceil_div(hidden, 32))), dim3(32, kReduceRows),
                         rargs, 0, stream);
  return err == cudaSuccess ? cudaGetLastError() : err;
}

}  // namespace rmsnorm_kernels
