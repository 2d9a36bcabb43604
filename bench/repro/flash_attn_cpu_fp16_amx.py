"""Issue 35, part 1: why flash-attn2's CPU variant is wrong in fp16 on a CPU with AVX512-BF16 and AMX.

Two checks, printed as one JSON object:

1. torch's own brgemm on this CPU (`at::native::cpublas::brgemm`, the call the kernel's AVX512+AMX
   path makes): C = A @ B in fp16 and bf16 with B handed over VNNI-packed (K pairs interleaved, as
   the kernel's `pack_vnni` / `pack_vnni2` always pack it) and plain, beside `could_pack(dtype)`, torch's
   answer to "does brgemm take this dtype VNNI-packed here".
2. `flash_attn_varlen_func` of the variant folder given (a causal 1 x 48 x 4 x 64 sequence, fp16 and
   bf16), against fp32 attention: its largest error. One folder per process: builds of one source
   register the same op namespace, which torch refuses twice.

    python bench/repro/flash_attn_cpu_fp16_amx.py              # the brgemm check
    python bench/repro/flash_attn_cpu_fp16_amx.py FOLDER LABEL  # one variant folder

bench/repro/flash_attn_cpu_fp16_amx.sh builds the folders (kbuild, unchanged and with the dispatch
gated on could_pack; torch.utils.cpp_extension with the kernel's flags) and runs this.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
from pathlib import Path

import torch  # noqa: TID253 - a repro of a torch kernel: torch is what it runs
import torch.nn.functional as F  # noqa: TID253 - as torch
from torch.utils.cpp_extension import load_inline  # noqa: TID253 - as torch

BRGEMM = r"""
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/native/CPUBlas.h>

bool could_pack(bool half) { return at::native::cpublas::could_pack(half ? at::kHalf : at::kBFloat16); }

// C = A @ B through cpublas::brgemm (is_vnni = true, as the kernel calls it), B VNNI-packed or plain.
at::Tensor brgemm(at::Tensor a, at::Tensor b, bool vnni) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  at::Tensor packed = vnni ? b.view({K / 2, 2, N}).transpose(1, 2).contiguous() : b.contiguous();
  at::Tensor c = at::zeros({M, N}, a.options().dtype(at::kFloat));
  AT_DISPATCH_REDUCED_FLOATING_TYPES(a.scalar_type(), "brgemm", [&] {
    at::native::cpublas::brgemm(M, N, K, K, N, N, false, a.data_ptr<scalar_t>(),
                                packed.data_ptr<scalar_t>(), c.data_ptr<float>(), true);
  });
  at::native::cpublas::brgemm_release(true);
  return c;
}
"""


def cpu_flags() -> list[str]:
    wanted = ("avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16", "amx_int8", "amx_tile")
    try:
        flags = next(line for line in open("/proc/cpuinfo") if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return []
    return [flag for flag in wanted if flag in flags]


def brgemm_check() -> dict:
    with tempfile.TemporaryDirectory() as build:
        ext = load_inline("kbrepro_brgemm", cpp_sources=BRGEMM, functions=["could_pack", "brgemm"],
                          build_directory=build, extra_cflags=["-O2"])
        torch.manual_seed(0)
        result = {}
        for dtype in (torch.float16, torch.bfloat16):
            a, b = torch.randn(16, 64).to(dtype), torch.randn(64, 32).to(dtype)
            want = a.float() @ b.float()
            row = {"could_pack": ext.could_pack(dtype == torch.float16)}
            for vnni in (True, False):
                try:
                    row["vnni" if vnni else "plain"] = round((ext.brgemm(a, b, vnni) - want).abs().max().item(), 4)
                except RuntimeError as error:
                    row["vnni" if vnni else "plain"] = str(error).splitlines()[0][:160]
            result[str(dtype).removeprefix("torch.")] = row
        return result


def import_variant(folder: Path):
    spec = importlib.util.spec_from_file_location(f"fa2_{abs(hash(str(folder)))}", folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    assert spec is not None and spec.loader is not None  # a .py path always gets a spec with a loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def attention_errors(folder: Path) -> dict:
    kernel = import_variant(folder)
    torch.manual_seed(0)
    errors = {}
    for dtype in (torch.float16, torch.bfloat16):
        q, k, v = (torch.randn(48, 4, 64).to(dtype) for _ in range(3))
        cu = torch.tensor([0, 48], dtype=torch.int32)
        out = kernel.flash_attn_varlen_func(q, k, v, cu, cu, 48, 48, causal=True)
        qt, kt, vt = (t.float().transpose(0, 1) for t in (q, k, v))
        ref = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
        errors[str(dtype).removeprefix("torch.")] = round((out.float() - ref.transpose(0, 1)).abs().max().item(), 4)
    return errors


def main(args: list[str]) -> None:
    if not args:
        report = {"cpu_flags": cpu_flags(), "torch": torch.__version__, "brgemm_max_error": brgemm_check()}
    else:
        folder, label = Path(args[0]), args[1] if len(args) > 1 else args[0]
        try:
            report = {"build": label, "flash_attn_varlen_max_error": attention_errors(folder)}
        except Exception as error:  # a build that failed is reported as such
            report = {"build": label, "flash_attn_varlen_max_error": f"{type(error).__name__}: {error}"[:300]}
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1:])
