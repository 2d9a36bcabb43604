// CPU loops for RMSNorm and fused add + RMSNorm; same contract as rmsnorm_cuda/rmsnorm.cuh
// (contiguous [rows, hidden] buffers of one dtype: 0 = float32, 1 = float16, 2 = bfloat16;
// float32 math). They return false for a bad dtype code or size.
#pragma once

#include <cstdint>

namespace rmsnorm_cpu {

enum DType : int { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };

// residual and residual_out are both null (plain RMSNorm) or both set (fused add + RMSNorm).
bool rms_norm_forward(void* out, void* residual_out, const void* x, const void* residual,
                      const void* weight, int64_t rows, int64_t hidden, float eps, int dtype);

// x is the tensor that was normalised; grad_add (nullable) is added to grad_x.
bool rms_norm_backward(void* grad_x, void* grad_weight, const void* grad_out, const void* grad_add,
                       const void* x, const void* weight, int64_t rows, int64_t hidden, float eps,
                       int dtype);

}  // namespace rmsnorm_cpu
