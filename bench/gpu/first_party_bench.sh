#!/usr/bin/env bash
# carry: .device/clean .device/prebuilt .device/wheels
# Issue 23's first-party figures on a one-GPU nvidia-h200: `kbuild bench` of activation, rmsnorm and
# rotary on the GPU, each workload beside its eager reference in one process (bench/RESULTS.md).
#   activation  torch-stable-abi210-cu130 built at 9.0a on the x86 dev machine (torch 2.14.1), carried
#               as .device/prebuilt/ (a stable-ABI build runs under the device's torch 2.11);
#   rmsnorm     torch211-cxx11-cu130 built here at 9.0a (a torch-specific variant);
#   rotary      torch-cuda (Triton, Python only).
# .device/clean: kbuild as committed (`git archive HEAD`); .device/wheels: kbuild's build extra for Python
# 3.12, kernels 0.16.2, plot/ (matplotlib and its wheels). Results into $OUT.
set -uo pipefail
source bench/gpu/harness.sh || exit 1
carried && snapshot .device/clean || exit 1
wheels pyelftools auditwheel abi3info starlette uvicorn shtab kernels tomlkit plot/ || exit 1
device_env KBUILD_CACHE=/tmp/kbcache
mkdir -p kernels/activation/build && cp -r .device/prebuilt/torch-stable-abi210-cu130-x86_64-linux kernels/activation/build/
as_repo kernels/rmsnorm kernels/rotary kernels/activation
t0=$(date +%s)
[ -n "${ONLY:-}" ] || kbuild build kernels/rmsnorm --variant torch211-cxx11-cu130-x86_64-linux --cuda-archs 9.0a -j 16 2>&1 | tail -n 3
kbuild build kernels/rotary 2>&1 | tail -n 2
echo "builds: $(( $(date +%s) - t0 )) s"
gpu_line
for k in ${ONLY:-activation rmsnorm rotary}; do  # ONLY=activation: that kernel alone
  kbuild bench kernels/$k --warmup 10 --repeats 50 --json $OUT/$k.json --plot $OUT/$k.svg 2>&1 | tail -n 12
done
