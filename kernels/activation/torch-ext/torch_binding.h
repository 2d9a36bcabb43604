// The binding's view of the kernels: the plain (torch-free) launchers of the backend being built.
// Exactly one of CPU_KERNEL / CUDA_KERNEL is defined by the builder for each variant.
#pragma once

#if defined(CUDA_KERNEL)
#include "../activation_cuda/activation.cuh"
#elif defined(CPU_KERNEL)
#include "../activation_cpu/activation_cpu.h"
#else
#error "activation: build with -DCPU_KERNEL or -DCUDA_KERNEL"
#endif
