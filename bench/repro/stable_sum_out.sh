#!/usr/bin/env bash
# The cause of flash-attn2's 256 MQA/GQA failures on the H200 (bench/corpus.md, run 6), on CPU:
# torch::stable::sum_out(out, x, {3}) -- the call flash_api.cpp:995 makes to sum dK/dV over head
# groups -- fails in the dispatcher with "Dimension out of range (... got <an address>)", with and
# without -DTORCH_TARGET_VERSION, in torch 2.14 and 2.11; the same call with
# std::vector<int64_t>{3} or {int64_t{3}} as the dims is right. So it is the kernel's source, not
# kbuild's flags: `{3}` is an int, the parameter a std::optional<HeaderOnlyArrayRef<int64_t>>, whose
# one-element constructor binds a temporary int64_t made inside std::optional's constructor and gone
# when the call reads it (the dims point at a dead stack slot; at -O0 a garbage dimension).
#   bash bench/repro/stable_sum_out.sh [PYTHON...]     (default: .venv/bin/python)
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for dims in "{3}" "{int64_t{3}}" "std::vector<int64_t>{3}"; do
  cat > "$work/gs.cpp" <<CPP
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <vector>
using torch::stable::Tensor;
Tensor group_sum(Tensor x) {
  Tensor out = torch::stable::new_empty(x, {x.size(0), x.size(1), x.size(2), x.size(4)});
  torch::stable::sum_out(out, x, $dims);
  return out;
}
STABLE_TORCH_LIBRARY(kbrepro, m) { m.def("group_sum(Tensor x) -> Tensor"); }
STABLE_TORCH_LIBRARY_IMPL(kbrepro, CPU, m) { m.impl("group_sum", TORCH_BOX(&group_sum)); }
CPP
  for py in "${@:-.venv/bin/python}"; do
    torch=$("$py" -c "import torch, os; print(os.path.dirname(torch.__file__))")
    for target in "-DTORCH_TARGET_VERSION=0x020a000000000000" ""; do
      g++ -std=c++17 -O3 -shared -fPIC -DTORCH_STABLE_ONLY $target -I"$torch/include" "$work/gs.cpp" \
        -o "$work/gs.so" -L"$torch/lib" -ltorch_cpu -lc10
      verdict=$("$py" -c "
import torch
torch.ops.load_library('$work/gs.so')
x = torch.randn(2, 3, 4, 5, 6)
try:
    print('right' if torch.allclose(torch.ops.kbrepro.group_sum(x), x.sum(3)) else 'wrong')
except RuntimeError:
    print('fails')" 2>/dev/null)
      echo "dims $dims, torch $("$py" -c 'import torch; print(torch.__version__)'), ${target:-no TORCH_TARGET_VERSION}: $verdict"
    done
  done
done
