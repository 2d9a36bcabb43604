// Op implementations registered by torch_binding.cpp (one set, for whichever backend is built).
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <tuple>

// out = x * rsqrt(mean(x^2, -1) + eps) * weight
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// (grad_x, grad_weight) of rms_norm.
std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad_out,
                                                     const at::Tensor& x,
                                                     const at::Tensor& weight, double eps);

// residual_out = x + residual; out = rms_norm(residual_out, weight, eps). Returns (out, residual_out).
std::tuple<at::Tensor, at::Tensor> fused_add_rms_norm(const at::Tensor& x,
                                                      const at::Tensor& residual,
                                                      const at::Tensor& weight, double eps);

// (grad_input, grad_weight) of fused_add_rms_norm, where grad_input is the gradient of both x and
// residual: the gradient through the norm plus grad_residual_out (when given).
std::tuple<at::Tensor, at::Tensor> fused_add_rms_norm_backward(
    const at::Tensor& grad_out, const std::optional<at::Tensor>& grad_residual_out,
    const at::Tensor& residual_out, const at::Tensor& weight, double eps);
