#!/usr/bin/env bash
# carry: .device/wheels
# Issue 33: kernels/activation's check re-run on the GPU after its fp16 workloads got rtol 2e-3
# (run 11 had silu_and_mul 'DIFFERS' under atol alone). On a one-GPU nvidia-h200: built at 9.0a,
# then its own tests and `kbuild bench` (every workload checked against its eager reference).
# .device/wheels: kbuild's build extra for Python 3.12. Results into $OUT.
set -uo pipefail
source bench/gpu/harness.sh || exit 1
carried && snapshot && wheels $BUILD_EXTRA_WHEELS || exit 1
device_env KBUILD_CACHE=/tmp/kbcache
rm -rf kernels/activation/build kernels/activation/.kbuild && as_repo kernels/activation
gpu_line
kbuild build kernels/activation --cuda-archs 9.0a -j 16 2>&1 | tail -n 3
kbuild test kernels/activation 2>&1 | tail -n 4
kbuild bench kernels/activation --warmup 10 --repeats 50 --json "$OUT/activation.json" 2>&1 | tail -n 16
