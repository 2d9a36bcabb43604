// Op schemas and implementations for the gated activations. Shared by the cpu and cuda variants:
// tensors are checked, made contiguous and allocated here; the math lives in the torch-free
// launchers of activation_cpu/ and activation_cuda/.
//
// Headers are kept light on purpose (torch/library.h + ATen/core/Tensor.h + one ATen/ops header)
// instead of torch/extension.h or torch/all.h: the binding compiles in a fraction of the time.
#include <torch/library.h>

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <cstdint>
#include <string>
#include <vector>

#include "registration.h"
#include "torch_binding.h"

#if defined(CUDA_KERNEL)
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace {

namespace ak = activation_kernels;

int dtype_code(const at::Tensor& t, const char* op) {
  switch (t.scalar_type()) {
    case at::kFloat:
      return 0;
    case at::kHalf:
      return 1;
    case at::kBFloat16:
      return 2;
    default:
      TORCH_CHECK(false, op, ": expected a float32, float16 or bfloat16 tensor, got ",
                  t.scalar_type());
  }
}

// "[2, 3, 8]". Formatted here: streaming x.sizes() into TORCH_CHECK segfaulted on torch 2.11.0
// (C++17, g++ 13) when the check failed.
std::string shape_str(at::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(sizes[i]);
  }
  return s + "]";
}

// x is [..., 2d]; returns d.
int64_t half_last_dim(const at::Tensor& x, const char* op) {
  TORCH_CHECK(x.dim() >= 1, op,
              ": expected x with at least one dimension [..., 2*d], got a 0-d tensor");
  TORCH_CHECK(x.size(-1) % 2 == 0, op,
              ": the last dimension of x must be even ([..., 2*d]), got shape ",
              shape_str(x.sizes()));
  return x.size(-1) / 2;
}

#if defined(CUDA_KERNEL)
using ForwardLauncher = cudaError_t (*)(void*, const void*, int64_t, int64_t, int, cudaStream_t);
using BackwardLauncher = cudaError_t (*)(void*, const void*, const void*, int64_t, int64_t, int,
                                         cudaStream_t);

void check_device(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.is_cuda(), op, ": expected a CUDA tensor, got one on ", t.device());
}

void check_launch(cudaError_t err, const char* op) {
  TORCH_CHECK(err == cudaSuccess, op, ": CUDA kernel launch failed: ", cudaGetErrorString(err));
}

void run_forward(ForwardLauncher fn, at::Tensor& out, const at::Tensor& x, int64_t rows,
                 int64_t d, int dtype, const char* op) {
  const c10::cuda::CUDAGuard guard(x.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(x.device().index());
  check_launch(fn(out.data_ptr(), x.const_data_ptr(), rows, d, dtype, stream), op);
}

void run_backward(BackwardLauncher fn, at::Tensor& grad_x, const at::Tensor& grad_out,
                  const at::Tensor& x, int64_t rows, int64_t d, int dtype, const char* op) {
  const c10::cuda::CUDAGuard guard(x.device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(x.device().index());
  check_launch(fn(grad_x.data_ptr(), grad_out.const_data_ptr(), x.const_data_ptr(), rows, d,
                  dtype, stream),
               op);
}

constexpr ForwardLauncher kSiluFwd = &ak::silu_and_mul_launch;
constexpr ForwardLauncher kGeluFwd = &ak::gelu_and_mul_launch;
constexpr ForwardLauncher kGeluTanhFwd = &ak::gelu_tanh_and_mul_launch;
constexpr BackwardLauncher kSiluBwd = &ak::silu_and_mul_backward_launch;
constexpr BackwardLauncher kGeluBwd = &ak::gelu_and_mul_backward_launch;
constexpr BackwardLauncher kGeluTanhBwd = &ak::gelu_tanh_and_mul_backward_launch;

#elif defined(CPU_KERNEL)
using ForwardLauncher = void (*)(void*, const void*, int64_t, int64_t, int);
using BackwardLauncher = void (*)(void*, const void*, const void*, int64_t, int64_t, int);

void check_device(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.is_cpu(), op, ": expected a CPU tensor, got one on ", t.device());
}

void run_forward(ForwardLauncher fn, at::Tensor& out, const at::Tensor& x, int64_t rows,
                 int64_t d, int dtype, const char* /*op*/) {
  fn(out.data_ptr(), x.const_data_ptr(), rows, d, dtype);
}

void run_backward(BackwardLauncher fn, at::Tensor& grad_x, const at::Tensor& grad_out,
                  const at::Tensor& x, int64_t rows, int64_t d, int dtype, const char* /*op*/) {
  fn(grad_x.data_ptr(), grad_out.const_data_ptr(), x.const_data_ptr(), rows, d, dtype);
}

constexpr ForwardLauncher kSiluFwd = &ak::silu_and_mul_cpu;
constexpr ForwardLauncher kGeluFwd = &ak::gelu_and_mul_cpu;
constexpr ForwardLauncher kGeluTanhFwd = &ak::gelu_tanh_and_mul_cpu;
constexpr BackwardLauncher kSiluBwd = &ak::silu_and_mul_backward_cpu;
constexpr BackwardLauncher kGeluBwd = &ak::gelu_and_mul_backward_cpu;
constexpr BackwardLauncher kGeluTanhBwd = &ak::gelu_tanh_and_mul_backward_cpu;
#endif

// out[..., d] = act(x[..., :d]) * x[..., d:]
at::Tensor act_and_mul(const at::Tensor& x_in, ForwardLauncher fn, const char* op) {
  check_device(x_in, op);
  const int dtype = dtype_code(x_in, op);
  const int64_t d = half_last_dim(x_in, op);
  const at::Tensor x = x_in.contiguous();
  std::vector<int64_t> out_sizes = x.sizes().vec();
  out_sizes.back() = d;
  at::Tensor out = at::empty(out_sizes, x.options());
  if (out.numel() == 0) return out;
  const int64_t rows = out.numel() / d;
  run_forward(fn, out, x, rows, d, dtype, op);
  return out;
}

// grad_x[..., 2d] = [grad_out * b * act'(a), grad_out * act(a)] with a, b = x[..., :d], x[..., d:]
at::Tensor act_and_mul_backward(const at::Tensor& grad_out_in, const at::Tensor& x_in,
                                BackwardLauncher fn, const char* op) {
  check_device(x_in, op);
  check_device(grad_out_in, op);
  TORCH_CHECK(grad_out_in.device() == x_in.device(), op,
              ": grad_out and x must be on the same device, got ", grad_out_in.device(), " and ",
              x_in.device());
  const int dtype = dtype_code(x_in, op);
  TORCH_CHECK(grad_out_in.scalar_type() == x_in.scalar_type(), op,
              ": grad_out and x must have the same dtype, got ", grad_out_in.scalar_type(),
              " and ", x_in.scalar_type());
  const int64_t d = half_last_dim(x_in, op);
  std::vector<int64_t> out_sizes = x_in.sizes().vec();
  out_sizes.back() = d;
  TORCH_CHECK(grad_out_in.sizes() == at::IntArrayRef(out_sizes), op,
              ": grad_out must have shape [..., d] = ", shape_str(out_sizes), ", got ",
              shape_str(grad_out_in.sizes()));
  const at::Tensor x = x_in.contiguous();
  const at::Tensor grad_out = grad_out_in.contiguous();
  at::Tensor grad_x = at::empty(x.sizes(), x.options());
  if (grad_x.numel() == 0) return grad_x;
  const int64_t rows = grad_out.numel() / d;
  run_backward(fn, grad_x, grad_out, x, rows, d, dtype, op);
  return grad_x;
}

at::Tensor silu_and_mul(const at::Tensor& x) { return act_and_mul(x, kSiluFwd, "silu_and_mul"); }

at::Tensor gelu_and_mul(const at::Tensor& x) { return act_and_mul(x, kGeluFwd, "gelu_and_mul"); }

at::Tensor gelu_tanh_and_mul(const at::Tensor& x) {
  return act_and_mul(x, kGeluTanhFwd, "gelu_tanh_and_mul");
}

at::Tensor silu_and_mul_backward(const at::Tensor& grad_out, const at::Tensor& x) {
  return act_and_mul_backward(grad_out, x, kSiluBwd, "silu_and_mul_backward");
}

at::Tensor gelu_and_mul_backward(const at::Tensor& grad_out, const at::Tensor& x) {
  return act_and_mul_backward(grad_out, x, kGeluBwd, "gelu_and_mul_backward");
}

at::Tensor gelu_tanh_and_mul_backward(const at::Tensor& grad_out, const at::Tensor& x) {
  return act_and_mul_backward(grad_out, x, kGeluTanhBwd, "gelu_tanh_and_mul_backward");
}

}  // namespace

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("silu_and_mul(Tensor x) -> Tensor");
  ops.def("gelu_and_mul(Tensor x) -> Tensor");
  ops.def("gelu_tanh_and_mul(Tensor x) -> Tensor");
  ops.def("silu_and_mul_backward(Tensor grad_out, Tensor x) -> Tensor");
  ops.def("gelu_and_mul_backward(Tensor grad_out, Tensor x) -> Tensor");
  ops.def("gelu_tanh_and_mul_backward(Tensor grad_out, Tensor x) -> Tensor");
#if defined(CPU_KERNEL)
  ops.impl("silu_and_mul", c10::kCPU, &silu_and_mul);
  ops.impl("gelu_and_mul", c10::kCPU, &gelu_and_mul);
  ops.impl("gelu_tanh_and_mul", c10::kCPU, &gelu_tanh_and_mul);
  ops.impl("silu_and_mul_backward", c10::kCPU, &silu_and_mul_backward);
  ops.impl("gelu_and_mul_backward", c10::kCPU, &gelu_and_mul_backward);
  ops.impl("gelu_tanh_and_mul_backward", c10::kCPU, &gelu_tanh_and_mul_backward);
#elif defined(CUDA_KERNEL)
  ops.impl("silu_and_mul", c10::kCUDA, &silu_and_mul);
  ops.impl("gelu_and_mul", c10::kCUDA, &gelu_and_mul);
  ops.impl("gelu_tanh_and_mul", c10::kCUDA, &gelu_tanh_and_mul);
  ops.impl("silu_and_mul_backward", c10::kCUDA, &silu_and_mul_backward);
  ops.impl("gelu_and_mul_backward", c10::kCUDA, &gelu_and_mul_backward);
  ops.impl("gelu_tanh_and_mul_backward", c10::kCUDA, &gelu_tanh_and_mul_backward);
#endif
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
