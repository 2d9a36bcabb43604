#!/usr/bin/env bash
# Issue 23's first-party figures on a one-GPU nvidia-h200: `kbuild bench` of activation, rmsnorm and
# rotary on the GPU, each workload beside its eager reference in one process (bench/RESULTS.md).
#   activation  torch-stable-abi210-cu130 built at 9.0a on the x86 dev machine (torch 2.14.1), carried
#               as .device/prebuilt/ (a stable-ABI build runs under the device's torch 2.11);
#   rmsnorm     torch211-cxx11-cu130 built here at 9.0a (a torch-specific variant);
#   rotary      torch-cuda (Triton, Python only).
# Carry: .device/clean (`git archive HEAD`), .device/prebuilt, .device/wheels (kbuild's build extra
# for Python 3.12, kernels 0.16.2, plot/: matplotlib and its wheels). Results into $OUT.
set -uo pipefail
rm -rf /tmp/snap /tmp/site && cp -r .device/clean /tmp/snap && cp -r .device /tmp/snap/ && cd /tmp/snap || exit 1
python -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
  .device/wheels/{pyelftools,auditwheel,abi3info,starlette,uvicorn,shtab,kernels,tomlkit}*.whl .device/wheels/plot/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site CI=1 PYTHONUNBUFFERED=1 KBUILD_CACHE=/tmp/kbcache CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
kbuild() { python -m builder.commands.main "$@"; }
mkdir -p kernels/activation/build && cp -r .device/prebuilt/torch-stable-abi210-cu130-x86_64-linux kernels/activation/build/
for k in rmsnorm rotary activation; do (cd kernels/$k && git init -q && git add -A && git -c user.email=k@localhost -c user.name=k commit -qm $k); done
t0=$(date +%s)
[ -n "${ONLY:-}" ] || kbuild build kernels/rmsnorm --variant torch211-cxx11-cu130-x86_64-linux --cuda-archs 9.0a -j 16 2>&1 | tail -n 3
kbuild build kernels/rotary 2>&1 | tail -n 2
echo "builds: $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for k in ${ONLY:-activation rmsnorm rotary}; do  # ONLY=activation: that kernel alone
  kbuild bench kernels/$k --warmup 10 --repeats 50 --json $OUT/$k.json --plot $OUT/$k.svg 2>&1 | tail -n 12
done
