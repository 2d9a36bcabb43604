// Plain CPU entry points for the gated activations (declarations only: no torch headers).
//
// Layout and dtype codes match activation_cuda/activation.cuh: x is a contiguous [rows, 2 * d]
// buffer, out is [rows, d], grad_out is [rows, d], grad_x is [rows, 2 * d];
// dtype 0 = float32, 1 = float16, 2 = bfloat16; all math is done in float32.
// The caller validates sizes and dtype; the loops run on ATen's intra-op thread pool.
#pragma once

#include <cstdint>

namespace activation_kernels {

void silu_and_mul_cpu(void* out, const void* x, int64_t rows, int64_t d, int dtype);
void gelu_and_mul_cpu(void* out, const void* x, int64_t rows, int64_t d, int dtype);
void gelu_tanh_and_mul_cpu(void* out, const void* x, int64_t rows, int64_t d, int dtype);

void silu_and_mul_backward_cpu(void* grad_x, const void* grad_out, const void* x, int64_t rows,
                               int64_t d, int dtype);
void gelu_and_mul_backward_cpu(void* grad_x, const void* grad_out, const void* x, int64_t rows,
                               int64_t d, int dtype);
void gelu_tanh_and_mul_backward_cpu(void* grad_x, const void* grad_out, const void* x,
                                    int64_t rows, int64_t d, int dtype);

}  // namespace activation_kernels
