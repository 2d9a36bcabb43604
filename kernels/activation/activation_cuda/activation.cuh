// Plain CUDA launchers for the gated activations (no torch headers).
//
// Layout: x is a contiguous [rows, 2 * d] buffer; a = x[:, :d], b = x[:, d:].
//   forward:  out[rows, d]      = act(a) * b
//   backward: grad_x[rows, 2 d] = [grad_out * b * act'(a), grad_out * act(a)]
// dtype codes: 0 = float32, 1 = float16, 2 = bfloat16; all math is done in float32.
// Every launcher enqueues on `stream` and returns the launch status (cudaSuccess, or
// cudaErrorInvalidValue for a bad dtype code or size). rows == 0 or d == 0 launches nothing.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace activation_kernels {

enum DType : int { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };

cudaError_t silu_and_mul_launch(void* out, const void* x, int64_t rows, int64_t d, int dtype,
                                cudaStream_t stream);
cudaError_t gelu_and_mul_launch(void* out, const void* x, int64_t rows, int64_t d, int dtype,
                                cudaStream_t stream);
cudaError_t gelu_tanh_and_mul_launch(void* out, const void* x, int64_t rows, int64_t d, int dtype,
                                     cudaStream_t stream);

cudaError_t silu_and_mul_backward_launch(void* grad_x, const void* grad_out, const void* x,
                                         int64_t rows, int64_t d, int dtype, cudaStream_t stream);
cudaError_t gelu_and_mul_backward_launch(void* grad_x, const void* grad_out, const void* x,
                                         int64_t rows, int64_t d, int dtype, cudaStream_t stream);
cudaError_t gelu_tanh_and_mul_backward_launch(void* grad_x, const void* grad_out, const void* x,
                                              int64_t rows, int64_t d, int dtype,
                                              cudaStream_t stream);

}  // namespace activation_kernels
