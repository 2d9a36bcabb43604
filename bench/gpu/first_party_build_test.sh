#!/usr/bin/env bash
# carry: .device/wheels kernels/activation/build/torch-stable-abi210-cu130-x86_64-linux
# GPU proof on the lent H200 (device tool): build kernels/* with kbuild for the machine's own
# torch (torch211-cxx11-cu130-x86_64-linux; activation, a stable-ABI kernel, as
# torch-stable-abi210-cu130-x86_64-linux), run every kernel's tests on the GPU, then the
# kernels' benchmarks (KBUILD_BENCH=1). Output goes to $OUT/gpu_proof.log.
# The stable-ABI activation is built on the x86 dev machine with torch 2.14 (the newest torch builds
# stable variants) and carried in its build folder. .device/wheels: kbuild's build extra for Python 3.12
# (the run of 2026-11-30 installed rich, ninja and pyelftools, all kbuild build needed then).
set -uo pipefail
source bench/gpu/harness.sh || exit 1
carried && snapshot || exit 1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_proof.log") 2>&1
wheels $BUILD_EXTRA_WHEELS || exit 1
device_env
gpu_line
python -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
nvcc --version | tail -1
V=torch211-cxx11-cu130-x86_64-linux
STABLE=torch-stable-abi210-cu130-x86_64-linux
time kbuild build . -j 16 --variant $V --variant torch-cuda
kbuild test . --variant $V --variant $STABLE --variant torch-cuda
for k in activation rmsnorm rotary; do
  for f in kernels/$k/.kbuild/*/test.log; do echo "== $f"; tail -3 "$f"; done
done
if [ "${KBUILD_BENCH:-0}" = 1 ]; then
  links=$(mktemp -d)
  for k in activation rmsnorm; do
    variant=$V; [ "$k" = activation ] && variant=$STABLE
    ln -s "$PWD/kernels/$k/build/$variant" "$links/$k"
    echo "== benchmark $k"; PYTHONPATH=$PWD:$links timeout 120 python kernels/$k/benchmarks/benchmark.py || true
  done
fi
