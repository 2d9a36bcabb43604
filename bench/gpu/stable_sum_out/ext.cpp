// flash-attn2's GQA backward pattern in miniature: sum a [a, b, g, c] tensor over its group axis
// into a preallocated output with torch::stable::sum_out. DIMS is how the call spells the axis list.
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

using torch::stable::Tensor;

Tensor group_sum(Tensor x) {
  Tensor out = torch::stable::new_empty(x, {x.size(0), x.size(1), x.size(3)});
  torch::stable::sum_out(out, x, DIMS);
  return out;
}

STABLE_TORCH_LIBRARY(stable_sum_out, m) { m.def("group_sum(Tensor x) -> Tensor"); }
STABLE_TORCH_LIBRARY_IMPL(stable_sum_out, CPU, m) { m.impl("group_sum", TORCH_BOX(&group_sum)); }
