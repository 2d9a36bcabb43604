#!/usr/bin/env bash
# Issue 35, part 1: flash-attn2's CPU variant, fp16, on a CPU with AVX512-BF16 and AMX. Builds the
# kernel's CPU variant three ways and runs bench/repro/flash_attn_cpu_fp16_amx.py on each:
#   kbuild     kbuild build, the kernel unchanged
#   cppext     torch.utils.cpp_extension.load over the same sources, the union of the kernel's section
#              flags on every file (what a setup.py would do), its library put in place of kbuild's
#   gated      kbuild build, the kernel's dispatch changed in one line: fp16 takes the AVX512+AMX path
#              only where torch's brgemm takes fp16 VNNI-packed (cpublas::could_pack)
#   bash bench/repro/flash_attn_cpu_fp16_amx.sh [KERNEL_DIR] [WORK_DIR]
# Needs kbuild's build extra in the running Python (PYTHON, default python).
set -uo pipefail
src=${1:-../shared/corpus/flash-attn2}; work=${2:-/tmp/fa2-amx}; py=${PYTHON:-python}
kbuild() { "$py" -m builder.commands.main "$@"; }
rm -rf "$work"; mkdir -p "$work"
cp -r "$src" "$work/kbuild"; cp -r "$src" "$work/gated"
dispatch="$work/gated/flash_attn_cpu/src/fmha_fwd_dispatch.cpp"
sed -i -e 's|#include <ATen/ATen.h>|#include <ATen/ATen.h>\n#include <ATen/native/CPUBlas.h>|' \
  -e 's|if (CPUFeatures::hasAllRequiredFeatures()) {|if (CPUFeatures::hasAllRequiredFeatures() \&\& (q.scalar_type() != at::kHalf \|\| at::native::cpublas::could_pack(at::kHalf))) {|' \
  "$dispatch"
grep -q could_pack "$dispatch" || { echo "the dispatch line was not found in $dispatch"; exit 1; }
variant=$(kbuild variants "$work/kbuild" | grep -o 'torch[0-9]*-cxx11-cpu-x86_64-linux  <-[^[]*\[this environment\]' | cut -d' ' -f1)
[ -n "$variant" ] || { echo "no CPU variant for this environment"; exit 1; }
for k in kbuild gated; do
  t0=$(date +%s)
  kbuild build "$work/$k" --variant "$variant" -j "$(nproc)" > "$work/$k.log" 2>&1
  echo "kbuild build $k: exit $? in $(( $(date +%s) - t0 )) s"
done
t0=$(date +%s)
"$py" - "$work/kbuild" "$work/cppext" "$variant" > "$work/cppext.log" 2>&1 <<'PY'
import shutil, sys
from pathlib import Path
from torch.utils.cpp_extension import load
src, dst, variant = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
shutil.copytree(src / "build" / variant, dst)   # the kernel's Python; its library is replaced below
library = next(dst.glob("_flash_attn2_cpu_*.so"))
cpu = src / "flash_attn_cpu"
sources = [src / "torch-ext/torch_binding.cpp", cpu / "flash_api.cpp", cpu / "src/fmha_fwd_dispatch.cpp",
           cpu / "src/fmha_fwd_fallback.cpp", cpu / "src/fmha_fwd_avx512.cpp"]
flags = ["-O3", "-std=c++20", "-DCPU_KERNEL", "-fopenmp", "-mavx512f", "-mavx512bf16", "-mavx512vl",
         "-mavx512dq", "-mavx512bw", "-mamx-bf16", "-mamx-int8", "-mamx-tile"]
(dst.parent / "cppext-build").mkdir()
name = library.name.split(".")[0]
load(name, [str(s) for s in sources], extra_cflags=flags,
             extra_include_paths=[str(cpu), str(src / ".kbuild/include")], extra_ldflags=["-fopenmp"],
             build_directory=str(dst.parent / "cppext-build"), is_python_module=False, verbose=True)
shutil.copyfile(dst.parent / "cppext-build" / f"{name}.so", library)
PY
echo "cpp_extension build: exit $? in $(( $(date +%s) - t0 )) s"
"$py" bench/repro/flash_attn_cpu_fp16_amx.py
# the kernel registers its Python ops for "cuda" alone wherever torch sees a GPU: hide it
export CUDA_VISIBLE_DEVICES=
"$py" bench/repro/flash_attn_cpu_fp16_amx.py "$work/kbuild/build/$variant" kbuild
"$py" bench/repro/flash_attn_cpu_fp16_amx.py "$work/cppext" cpp_extension
"$py" bench/repro/flash_attn_cpu_fp16_amx.py "$work/gated/build/$variant" "kbuild, dispatch gated on could_pack"
