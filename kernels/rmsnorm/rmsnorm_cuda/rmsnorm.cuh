// Plain CUDA launchers for RMSNorm and fused add + RMSNorm (no torch headers).
//
// Layout: every tensor is a contiguous [rows, hidden] buffer (weight and grad_weight: [hidden]);
// all of one dtype: 0 = float32, 1 = float16, 2 = bfloat16. Math is done in float32.
//   forward:  s = x (+ residual, rounded to the dtype and written to residual_out when fused)
//             out = s * rsqrt(mean(s^2) + eps) * weight
//   backward: gw = grad_out * weight, rstd = rsqrt(mean(x^2) + eps)
//             grad_x = rstd * gw - x * rstd^3 * mean(gw * x)  (+ grad_add, when given)
//             grad_weight = sum over rows of grad_out * x * rstd
// Every launcher enqueues on `stream` and returns the launch status (cudaSuccess, or
// cudaErrorInvalidValue for a bad dtype code, size or workspace). rows == 0 or hidden == 0
// launches nothing.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace rmsnorm_kernels {

enum DType : int { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };

// residual and residual_out are both null (plain RMSNorm) or both set (fused add + RMSNorm).
cudaError_t rms_norm_forward_launch(void* out, void* residual_out, const void* x,
                                    const void* residual, const void* weight, int64_t rows,
                                    int64_t hidden, float eps, int dtype, cudaStream_t stream);

// Bytes of float32 scratch rms_norm_backward_launch needs for these sizes on the current device
// (per-block partial sums of grad_weight). The caller allocates it; its contents do not matter.
size_t rms_norm_backward_workspace_size(int64_t rows, int64_t hidden, int dtype);

// x is the tensor that was normalised (residual_out for the fused op); grad_add (nullable) is
// added to grad_x (the gradient flowing into residual_out directly). grad_x may not alias x.
cudaError_t rms_norm_backward_launch(void* grad_x, void* grad_weight, void* workspace,
                                     size_t workspace_bytes, const void* grad_out,
                                     const void* grad_add, const void* x, const void* weight,
                                     int64_t rows, int64_t hidden, float eps, int dtype,
                                     cudaStream_t stream);

}  // namespace rmsnorm_kernels
