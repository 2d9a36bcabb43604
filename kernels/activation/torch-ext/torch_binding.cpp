// Op schemas and implementations for the gated activations. Shared by the cpu and cuda variants:
// tensors are checked, made contiguous and allocated here; the math lives in the torch-free
// launchers of activation_cpu/ and activation_cuda/.
//
// Written against torch's stable ABI ([torch] stable-abi = "2.10" in build.toml): only
// torch/csrc/stable and torch/headeronly, so one build per backend loads in every torch >= 2.10.
#if defined(CUDA_KERNEL)
// The shim declares aoti_torch_get_current_cuda_stream for CUDA builds only; defined before the
// first torch header, since they all include the shim.
#define USE_CUDA
#endif

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <cstdint>
#include <string>
#include <vector>

#include "registration.h"
#include "torch_binding.h"

#if defined(CUDA_KERNEL)
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>
#endif

namespace {

namespace ak = activation_kernels;
using torch::headeronly::DeviceType;
using torch::headeronly::IntHeaderOnlyArrayRef;
using torch::headeronly::ScalarType;
using torch::stable::Tensor;

int dtype_code(const Tensor& t, const char* op) {
  switch (t.scalar_type()) {
    case ScalarType::Float:
      return 0;
    case ScalarType::Half:
      return 1;
    case ScalarType::BFloat16:
      return 2;
    default:
      STD_TORCH_CHECK(false, op, ": expected a float32, float16 or bfloat16 tensor, got ",
                      t.scalar_type());
  }
}

// "[2, 3, 8]". Formatted here: streaming x.sizes() into TORCH_CHECK segfaulted on torch 2.11.0
// (C++17, g++ 13) when the check failed; the stable IntHeaderOnlyArrayRef has no operator<< at all.
std::string shape_str(IntHeaderOnlyArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(sizes[i]);
  }
  return s + "]";
}

// "cpu", "cuda:0": torch::stable::Device has no operator<< at ABI 2.10.
std::string device_str(const Tensor& t) {
  const torch::stable::Device dev = t.device();
  switch (dev.type()) {
    case DeviceType::CPU:
      return "cpu";
    case DeviceType::CUDA:
      return "cuda:" + std::to_string(dev.index());
    case DeviceType::Meta:
      return "meta";
    default:
      return "device type " + std::to_string(static_cast<int>(dev.type()));
  }
}

// t itself when already contiguous: skips a boxed call through the dispatcher (~0.3 us of a
// ~8 us call on an [8, 256] CPU input).
Tensor as_contiguous(const Tensor& t) {
  return t.is_contiguous() ? t : torch::stable::contiguous(t);
}

// x is [..., 2d]; returns d.
int64_t half_last_dim(const Tensor& x, const char* op) {
  STD_TORCH_CHECK(x.dim() >= 1, op,
                  ": expected x with at least one dimension [..., 2*d], got a 0-d tensor");
  STD_TORCH_CHECK(x.size(-1) % 2 == 0, op,
                  ": the last dimension of x must be even ([..., 2*d]), got shape ",
                  shape_str(x.sizes()));
  return x.size(-1) / 2;
}

#if defined(CUDA_KERNEL)
using ForwardLauncher = cudaError_t (*)(void*, const void*, int64_t, int64_t, int, cudaStream_t);
using BackwardLauncher = cudaError_t (*)(void*, const void*, const void*, int64_t, int64_t, int,
                                         cudaStream_t);

void check_device(const Tensor& t, const char* op) {
  STD_TORCH_CHECK(t.is_cuda(), op, ": expected a CUDA tensor, got one on ", device_str(t));
}

void check_launch(cudaError_t err, const char* op) {
  STD_TORCH_CHECK(err == cudaSuccess, op, ": CUDA kernel launch failed: ",
                  cudaGetErrorString(err));
}

// torch's current stream on `device`, through the stable C shim (no c10::cuda at this ABI).
// TORCH_ERROR_CODE_CHECK, not STABLE_TORCH_ERROR_CODE_CHECK: torch 2.10's headers (this variant's
// oldest torch) have only the former.
cudaStream_t current_stream(int32_t device) {
  void* stream = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(device, &stream));
  return static_cast<cudaStream_t>(stream);
}

void run_forward(ForwardLauncher fn, Tensor& out, const Tensor& x, int64_t rows, int64_t d,
                 int dtype, const char* op) {
  const int32_t device = x.get_device_index();
  const torch::stable::accelerator::DeviceGuard guard(device);
  check_launch(fn(out.mutable_data_ptr(), x.const_data_ptr(), rows, d, dtype,
                  current_stream(device)),
               op);
}

void run_backward(BackwardLauncher fn, Tensor& grad_x, const Tensor& grad_out, const Tensor& x,
                  int64_t rows, int64_t d, int dtype, const char* op) {
  const int32_t device = x.get_device_index();
  const torch::stable::accelerator::DeviceGuard guard(device);
  check_launch(fn(grad_x.mutable_data_ptr(), grad_out.const_data_ptr(), x.const_data_ptr(), rows,
                  d, dtype, current_stream(device)),
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

void check_device(const Tensor& t, const char* op) {
  STD_TORCH_CHECK(t.is_cpu(), op, ": expected a CPU tensor, got one on ", device_str(t));
}

void run_forward(ForwardLauncher fn, Tensor& out, const Tensor& x, int64_t rows, int64_t d,
                 int dtype, const char* /*op*/) {
  fn(out.mutable_data_ptr(), x.const_data_ptr(), rows, d, dtype);
}

void run_backward(BackwardLauncher fn, Tensor& grad_x, const Tensor& grad_out, const Tensor& x,
                  int64_t rows, int64_t d, int dtype, const char* /*op*/) {
  fn(grad_x.mutable_data_ptr(), grad_out.const_data_ptr(), x.const_data_ptr(), rows, d, dtype);
}

constexpr ForwardLauncher kSiluFwd = &ak::silu_and_mul_cpu;
constexpr ForwardLauncher kGeluFwd = &ak::gelu_and_mul_cpu;
constexpr ForwardLauncher kGeluTanhFwd = &ak::gelu_tanh_and_mul_cpu;
constexpr BackwardLauncher kSiluBwd = &ak::silu_and_mul_backward_cpu;
constexpr BackwardLauncher kGeluBwd = &ak::gelu_and_mul_backward_cpu;
constexpr BackwardLauncher kGeluTanhBwd = &ak::gelu_tanh_and_mul_backward_cpu;
#endif

// out[..., d] = act(x[..., :d]) * x[..., d:]
Tensor act_and_mul(const Tensor& x_in, ForwardLauncher fn, const char* op) {
  check_device(x_in, op);
  const int dtype = dtype_code(x_in, op);
  const int64_t d = half_last_dim(x_in, op);
  const Tensor x = as_contiguous(x_in);
  std::vector<int64_t> out_sizes = x.sizes().vec();
  out_sizes.back() = d;
  Tensor out = torch::stable::new_empty(x, out_sizes);  // x's dtype and device
  if (out.numel() == 0) return out;
  const int64_t rows = out.numel() / d;
  run_forward(fn, out, x, rows, d, dtype, op);
  return out;
}

// grad_x[..., 2d] = [grad_out * b * act'(a), grad_out * act(a)] with a, b = x[..., :d], x[..., d:]
Tensor act_and_mul_backward(const Tensor& grad_out_in, const Tensor& x_in, BackwardLauncher fn,
                            const char* op) {
  check_device(x_in, op);
  check_device(grad_out_in, op);
  STD_TORCH_CHECK(grad_out_in.device() == x_in.device(), op,
                  ": grad_out and x must be on the same device, got ", device_str(grad_out_in),
                  " and ", device_str(x_in));
  const int dtype = dtype_code(x_in, op);
  STD_TORCH_CHECK(grad_out_in.scalar_type() == x_in.scalar_type(), op,
                  ": grad_out and x must have the same dtype, got ", grad_out_in.scalar_type(),
                  " and ", x_in.scalar_type());
  const int64_t d = half_last_dim(x_in, op);
  std::vector<int64_t> out_sizes = x_in.sizes().vec();
  out_sizes.back() = d;
  // compared as vectors: torch 2.10's headers give HeaderOnlyArrayRef no operator==
  STD_TORCH_CHECK(grad_out_in.sizes().vec() == out_sizes, op,
                  ": grad_out must have shape [..., d] = ", shape_str(out_sizes), ", got ",
                  shape_str(grad_out_in.sizes()));
  const Tensor x = as_contiguous(x_in);
  const Tensor grad_out = as_contiguous(grad_out_in);
  Tensor grad_x = torch::stable::new_empty(x, x.sizes());
  if (grad_x.numel() == 0) return grad_x;
  const int64_t rows = grad_out.numel() / d;
  run_backward(fn, grad_x, grad_out, x, rows, d, dtype, op);
  return grad_x;
}

Tensor silu_and_mul(const Tensor& x) { return act_and_mul(x, kSiluFwd, "silu_and_mul"); }

Tensor gelu_and_mul(const Tensor& x) { return act_and_mul(x, kGeluFwd, "gelu_and_mul"); }

Tensor gelu_tanh_and_mul(const Tensor& x) {
  return act_and_mul(x, kGeluTanhFwd, "gelu_tanh_and_mul");
}

Tensor silu_and_mul_backward(const Tensor& grad_out, const Tensor& x) {
  return act_and_mul_backward(grad_out, x, kSiluBwd, "silu_and_mul_backward");
}

Tensor gelu_and_mul_backward(const Tensor& grad_out, const Tensor& x) {
  return act_and_mul_backward(grad_out, x, kGeluBwd, "gelu_and_mul_backward");
}

Tensor gelu_tanh_and_mul_backward(const Tensor& grad_out, const Tensor& x) {
  return act_and_mul_backward(grad_out, x, kGeluTanhBwd, "gelu_tanh_and_mul_backward");
}

}  // namespace

STABLE_TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("silu_and_mul(Tensor x) -> Tensor");
  ops.def("gelu_and_mul(Tensor x) -> Tensor");
  ops.def("gelu_tanh_and_mul(Tensor x) -> Tensor");
  ops.def("silu_and_mul_backward(Tensor grad_out, Tensor x) -> Tensor");
  ops.def("gelu_and_mul_backward(Tensor grad_out, Tensor x) -> Tensor");
  ops.def("gelu_tanh_and_mul_backward(Tensor grad_out, Tensor x) -> Tensor");
}

#if defined(CPU_KERNEL)
#define ACTIVATION_DISPATCH_KEY CPU
#elif defined(CUDA_KERNEL)
#define ACTIVATION_DISPATCH_KEY CUDA
#endif

// The stable library takes boxed kernels; TORCH_BOX wraps each typed function.
STABLE_TORCH_LIBRARY_IMPL_EXPAND(TORCH_EXTENSION_NAME, ACTIVATION_DISPATCH_KEY, ops) {
  ops.impl("silu_and_mul", TORCH_BOX(&silu_and_mul));
  ops.impl("gelu_and_mul", TORCH_BOX(&gelu_and_mul));
  ops.impl("gelu_tanh_and_mul", TORCH_BOX(&gelu_tanh_and_mul));
  ops.impl("silu_and_mul_backward", TORCH_BOX(&silu_and_mul_backward));
  ops.impl("gelu_and_mul_backward", TORCH_BOX(&gelu_and_mul_backward));
  ops.impl("gelu_tanh_and_mul_backward", TORCH_BOX(&gelu_tanh_and_mul_backward));
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
