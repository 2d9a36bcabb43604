#!/usr/bin/env bash
# Why flash-attn2@v3's GQA backward fails (bench/RESULTS.md, issue 22): its flash_api.cpp sums dK/dV
# over the head groups with `torch::stable::sum_out(dk, ..., {3})`. The `{3}` is an int; the dims
# parameter is std::optional<HeaderOnlyArrayRef<int64_t>>, whose one-element constructor binds a
# temporary int64_t made inside std::optional's constructor, gone when the call reads it: the dims
# list points at a dead stack slot. No GPU needed: this builds the same call on CPU with the
# stable-ABI flags kbuild uses and runs each spelling.
#   bash bench/gpu/stable_sum_out/run.sh [PYTHON]   (default .venv/bin/python: torch with headers)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd); py=${1:-.venv/bin/python}; out=$(mktemp -d)
read -r inc lib < <("$py" -c "import os, torch, torch.utils.cpp_extension as c; print(','.join(c.include_paths()), os.path.join(os.path.dirname(torch.__file__), 'lib'))" 2>/dev/null)
echo "torch $("$py" -c 'import torch; print(torch.__version__)'), g++ $(g++ -dumpversion), -DTORCH_TARGET_VERSION=2.10 as kbuild's torch-stable-abi210 variant"
i=0
for dims in '{2}' '{int64_t{2}}' 'std::vector<int64_t>{2}'; do
  for opt in -O0 -O2; do
    i=$((i + 1))
    g++ -std=c++17 $opt -shared -fPIC -DTORCH_STABLE_ONLY -DTORCH_TARGET_VERSION=0x020a000000000000 \
      "-DDIMS=$dims" -I${inc//,/ -I} "$here/ext.cpp" -o "$out/ext$i.so" -L"$lib" -ltorch -ltorch_cpu -lc10
    "$py" "$here/check.py" "$out/ext$i.so" "$dims $opt" 2>/dev/null
  done
done
rm -rf "$out"
