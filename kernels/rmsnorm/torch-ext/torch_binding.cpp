// Op schemas and implementations for every backend. The binding checks tensors, makes them
// contiguous, allocates outputs, and calls the backend's plain launcher (rmsnorm_cuda/ or
// rmsnorm_cpu/) chosen by the <BACKEND>_KERNEL define the builder sets. The forward ops'
// autograd is here too, in C++: a Python autograd kernel cost more host time per training step
// than the whole GPU work of a small batch (docs/writing-kernels.md).
#include <torch/autograd.h>
#include <torch/library.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

#include "registration.h"
#include "torch_binding.h"

#if defined(CUDA_KERNEL)
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "../rmsnorm_cuda/rmsnorm.cuh"
#elif defined(CPU_KERNEL)
#include "../rmsnorm_cpu/rmsnorm_cpu.h"
#endif

namespace {

int dtype_code(const char* op, const at::Tensor& x) {
  switch (x.scalar_type()) {
    case at::kFloat: return 0;
    case at::kHalf: return 1;
    case at::kBFloat16: return 2;
    default:
      TORCH_CHECK(false, op, ": expected a float32, float16 or bfloat16 tensor, got ",
                  x.scalar_type());
  }
}

// "[2, 3, 8]". Formatted here: streaming t.sizes() into a failing TORCH_CHECK segfaulted in a
// kbuild-built torch 2.11 variant on the H200 (g++ 13, C++17); see bench/RESULTS.md.
std::string shape_str(at::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(sizes[i]);
  }
  return s + "]";
}

void check_like(const char* op, const char* name, const at::Tensor& t, const at::Tensor& x) {
  TORCH_CHECK(t.sizes() == x.sizes(), op, ": ", name, " must have the shape of x ", shape_str(x.sizes()),
              ", got ", shape_str(t.sizes()));
  TORCH_CHECK(t.scalar_type() == x.scalar_type(), op, ": ", name, " must have the dtype of x (",
              x.scalar_type(), "), got ", t.scalar_type());
  TORCH_CHECK(t.device() == x.device(), op, ": ", name, " must be on ", x.device(), ", got ",
              t.device());
}

// Checks x and weight; returns the dtype code.
int check_inputs(const char* op, const at::Tensor& x, const at::Tensor& weight) {
  TORCH_CHECK(x.dim() >= 1, op, ": x must have at least one dimension");
  const int code = dtype_code(op, x);
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == x.size(-1), op,
              ": weight must have shape [", x.size(-1), "] (the last dim of x), got ",
              shape_str(weight.sizes()));
  TORCH_CHECK(weight.scalar_type() == x.scalar_type(), op, ": weight must have the dtype of x (",
              x.scalar_type(), "), got ", weight.scalar_type());
  TORCH_CHECK(weight.device() == x.device(), op, ": weight must be on ", x.device(), ", got ",
              weight.device());
  return code;
}

int64_t rows_of(const at::Tensor& x) {
  const int64_t hidden = x.size(-1);
  return hidden == 0 ? 0 : x.numel() / hidden;
}

const void* ptr_or_null(const std::optional<at::Tensor>& t) {
  return t.has_value() ? t->const_data_ptr() : nullptr;
}

// All tensors contiguous; residual / residual_out both present or both absent.
void forward_impl(const char* op, at::Tensor& out, std::optional<at::Tensor>& residual_out,
                  const at::Tensor& x, const std::optional<at::Tensor>& residual,
                  const at::Tensor& weight, double eps, int dtype) {
  const int64_t hidden = x.size(-1);
  const int64_t rows = rows_of(x);
  void* res_out = residual_out.has_value() ? residual_out->mutable_data_ptr() : nullptr;
#if defined(CUDA_KERNEL)
  const c10::cuda::CUDAGuard guard(x.device());
  const cudaError_t err = rmsnorm_kernels::rms_norm_forward_launch(
      out.mutable_data_ptr(), res_out, x.const_data_ptr(), ptr_or_null(residual),
      weight.const_data_ptr(), rows, hidden, static_cast<float>(eps), dtype,
      c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, op, ": CUDA kernel launch failed: ", cudaGetErrorString(err));
#elif defined(CPU_KERNEL)
  const bool ok = rmsnorm_cpu::rms_norm_forward(out.mutable_data_ptr(), res_out, x.const_data_ptr(),
                                                ptr_or_null(residual), weight.const_data_ptr(),
                                                rows, hidden, static_cast<float>(eps), dtype);
  TORCH_CHECK(ok, op, ": bad arguments for the CPU kernel");
#else
  TORCH_CHECK(false, op, ": this build has no kernel backend");
#endif
}

// All tensors contiguous; x is what was normalised.
std::tuple<at::Tensor, at::Tensor> backward_impl(const char* op, const at::Tensor& grad_out,
                                                 const std::optional<at::Tensor>& grad_add,
                                                 const at::Tensor& x, const at::Tensor& weight,
                                                 double eps, int dtype) {
  const int64_t hidden = x.size(-1);
  const int64_t rows = rows_of(x);
  at::Tensor grad_x = at::empty(x.sizes(), x.options());
  at::Tensor grad_weight = at::empty(weight.sizes(), weight.options());
#if defined(CUDA_KERNEL)
  const c10::cuda::CUDAGuard guard(x.device());
  const size_t ws_bytes = rmsnorm_kernels::rms_norm_backward_workspace_size(rows, hidden, dtype);
  const at::Tensor workspace =
      at::empty({static_cast<int64_t>((ws_bytes + 3) / 4)}, x.options().dtype(at::kFloat));
  const cudaError_t err = rmsnorm_kernels::rms_norm_backward_launch(
      grad_x.mutable_data_ptr(), grad_weight.mutable_data_ptr(),
      ws_bytes > 0 ? workspace.mutable_data_ptr() : nullptr, ws_bytes,
      grad_out.const_data_ptr(), ptr_or_null(grad_add), x.const_data_ptr(),
      weight.const_data_ptr(), rows, hidden, static_cast<float>(eps), dtype,
      c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, op, ": CUDA kernel launch failed: ", cudaGetErrorString(err));
#elif defined(CPU_KERNEL)
  const bool ok = rmsnorm_cpu::rms_norm_backward(
      grad_x.mutable_data_ptr(), grad_weight.mutable_data_ptr(), grad_out.const_data_ptr(),
      ptr_or_null(grad_add), x.const_data_ptr(), weight.const_data_ptr(), rows, hidden,
      static_cast<float>(eps), dtype);
  TORCH_CHECK(ok, op, ": bad arguments for the CPU kernel");
#else
  TORCH_CHECK(false, op, ": this build has no kernel backend");
#endif
  return {grad_x, grad_weight};
}

}  // namespace

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const int dtype = check_inputs("rms_norm", x, weight);
  const at::Tensor xc = x.contiguous();
  at::Tensor out = at::empty(x.sizes(), x.options());
  std::optional<at::Tensor> no_residual_out;
  forward_impl("rms_norm", out, no_residual_out, xc, std::nullopt, weight.contiguous(), eps,
               dtype);
  return out;
}

std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& grad_out,
                                                     const at::Tensor& x,
                                                     const at::Tensor& weight, double eps) {
  const int dtype = check_inputs("rms_norm_backward", x, weight);
  check_like("rms_norm_backward", "grad_out", grad_out, x);
  return backward_impl("rms_norm_backward", grad_out.contiguous(), std::nullopt, x.contiguous(),
                       weight.contiguous(), eps, dtype);
}

std::tuple<at::Tensor, at::Tensor> fused_add_rms_norm(const at::Tensor& x,
                                                      const at::Tensor& residual,
                                                      const at::Tensor& weight, double eps) {
  const int dtype = check_inputs("fused_add_rms_norm", x, weight);
  check_like("fused_add_rms_norm", "residual", residual, x);
  at::Tensor out = at::empty(x.sizes(), x.options());
  std::optional<at::Tensor> residual_out = at::empty(x.sizes(), x.options());
  forward_impl("fused_add_rms_norm", out, residual_out, x.contiguous(), residual.contiguous(),
               weight.contiguous(), eps, dtype);
  return {out, *residual_out};
}

std::tuple<at::Tensor, at::Tensor> fused_add_rms_norm_backward(
    const at::Tensor& grad_out, const std::optional<at::Tensor>& grad_residual_out,
    const at::Tensor& residual_out, const at::Tensor& weight, double eps) {
  const char* op = "fused_add_rms_norm_backward";
  const int dtype = check_inputs(op, residual_out, weight);
  check_like(op, "grad_out", grad_out, residual_out);
  std::optional<at::Tensor> grad_add;
  if (grad_residual_out.has_value() && grad_residual_out->defined()) {
    check_like(op, "grad_residual_out", *grad_residual_out, residual_out);
    grad_add = grad_residual_out->contiguous();
  }
  return backward_impl(op, grad_out.contiguous(), grad_add, residual_out.contiguous(),
                       weight.contiguous(), eps, dtype);
}

// ---- autograd ----------------------------------------------------------------------------------
// Each Function calls its ops through the dispatcher, below autograd, so fake tensors under
// torch.compile reach the fake implementations registered in Python rather than the kernels.

template <typename Signature>
c10::TypedOperatorHandle<Signature> op_handle(const char* name) {
  return c10::Dispatcher::singleton()
      .findSchemaOrThrow((std::string(STRINGIFY(TORCH_EXTENSION_NAME)) + "::" + name).c_str(), "")
      .typed<Signature>();
}

using TensorPair = std::tuple<at::Tensor, at::Tensor>;

class RmsNormFunction : public torch::autograd::Function<RmsNormFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& weight, double eps) {
    static const auto op =
        op_handle<at::Tensor(const at::Tensor&, const at::Tensor&, double)>("rms_norm");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    ctx->save_for_backward({x, weight});
    ctx->saved_data["eps"] = eps;
    return op.call(x, weight, eps);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    static const auto op =
        op_handle<TensorPair(const at::Tensor&, const at::Tensor&, const at::Tensor&, double)>(
            "rms_norm_backward");
    const auto saved = ctx->get_saved_variables();
    auto [grad_x, grad_weight] = op.call(grads[0], saved[0], saved[1], ctx->saved_data["eps"].toDouble());
    return {grad_x, grad_weight, at::Tensor()};
  }
};

class FusedAddRmsNormFunction : public torch::autograd::Function<FusedAddRmsNormFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const at::Tensor& x, const at::Tensor& residual,
                                                const at::Tensor& weight, double eps) {
    static const auto op =
        op_handle<TensorPair(const at::Tensor&, const at::Tensor&, const at::Tensor&, double)>(
            "fused_add_rms_norm");
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    auto [out, residual_out] = op.call(x, residual, weight, eps);
    ctx->save_for_backward({residual_out, weight});
    ctx->saved_data["eps"] = eps;
    // An unused residual_out gets no gradient rather than a tensor of zeros to read.
    ctx->set_materialize_grads(false);
    return {out, residual_out};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    static const auto op = op_handle<TensorPair(const at::Tensor&, const std::optional<at::Tensor>&,
                                                const at::Tensor&, const at::Tensor&, double)>(
        "fused_add_rms_norm_backward");
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& residual_out = saved[0];
    const at::Tensor grad_out = grads[0].defined() ? grads[0] : at::zeros_like(residual_out);
    std::optional<at::Tensor> grad_residual_out;
    if (grads[1].defined()) grad_residual_out = grads[1];
    auto [grad_input, grad_weight] = op.call(grad_out, grad_residual_out, residual_out, saved[1],
                                             ctx->saved_data["eps"].toDouble());
    // d(x + residual)/dx = d(x + residual)/dresidual = identity.
    return {grad_input, grad_input, grad_weight, at::Tensor()};
  }
};

at::Tensor rms_norm_autograd(const at::Tensor& x, const at::Tensor& weight, double eps) {
  return RmsNormFunction::apply(x, weight, eps);
}

TensorPair fused_add_rms_norm_autograd(const at::Tensor& x, const at::Tensor& residual,
                                       const at::Tensor& weight, double eps) {
  const auto outputs = FusedAddRmsNormFunction::apply(x, residual, weight, eps);
  return {outputs[0], outputs[1]};
}

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("rms_norm(Tensor x, Tensor weight, float eps) -> Tensor");
  ops.def(
      "rms_norm_backward(Tensor grad_out, Tensor x, Tensor weight, float eps) "
      "-> (Tensor grad_x, Tensor grad_weight)");
  ops.def(
      "fused_add_rms_norm(Tensor x, Tensor residual, Tensor weight, float eps) "
      "-> (Tensor out, Tensor residual_out)");
  ops.def(
      "fused_add_rms_norm_backward(Tensor grad_out, Tensor? grad_residual_out, "
      "Tensor residual_out, Tensor weight, float eps) -> (Tensor grad_input, Tensor grad_weight)");
  ops.impl("rms_norm", torch::dispatch(c10::DispatchKey::Autograd, TORCH_FN(rms_norm_autograd)));
  ops.impl("fused_add_rms_norm",
           torch::dispatch(c10::DispatchKey::Autograd, TORCH_FN(fused_add_rms_norm_autograd)));
#if defined(CPU_KERNEL)
  ops.impl("rms_norm", c10::kCPU, &rms_norm);
  ops.impl("rms_norm_backward", c10::kCPU, &rms_norm_backward);
  ops.impl("fused_add_rms_norm", c10::kCPU, &fused_add_rms_norm);
  ops.impl("fused_add_rms_norm_backward", c10::kCPU, &fused_add_rms_norm_backward);
#elif defined(CUDA_KERNEL)
  ops.impl("rms_norm", c10::kCUDA, &rms_norm);
  ops.impl("rms_norm_backward", c10::kCUDA, &rms_norm_backward);
  ops.impl("fused_add_rms_norm", c10::kCUDA, &fused_add_rms_norm);
  ops.impl("fused_add_rms_norm_backward", c10::kCUDA, &fused_add_rms_norm_backward);
#endif
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
