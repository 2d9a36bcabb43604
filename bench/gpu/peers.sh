#!/usr/bin/env bash
# carry: .device/wheels
# Issue 33's side-by-side figures on a one-GPU nvidia-h200 (torch 2.11.0+cu130, 16 vCPUs, no internet):
# bench/peers.py times kbuild's rmsnorm, activation and rotary beside eager, torch.compile,
# F.rms_norm and Liger-Kernel in one process, fp16 and bf16 (bench/peers.py's docstring).
#   rmsnorm     torch211-cxx11-cu130-x86_64-linux built here at 9.0a (torch-specific);
#   activation  torch-stable-abi210-cu130-x86_64-linux built here at 9.0a (a stable-ABI kernel: that
#               is its only CUDA variant name, whatever torch >= 2.10 builds it);
#   rotary      torch-cuda (Triton, Python only).
# Each kernel's tests run on the GPU first (TESTS=0 skips them; TEST_KERNELS=rmsnorm tests only those named). The default grid is ~3 minutes
# (compiles included); TIMING=graph times the GPU's work alone (CUDA graphs, bench/peers.py's
# docstring); TOKENS=1,4096,32768 HIDDEN=1024,4096,8192, or SHAPES=1x4096,4096x8192 (or
# DTYPES, WORKLOADS) widen it, ~25 s per extra (shape, dtype): in the foreground within one device
# call, or detached and brought back by bench/gpu/collect.sh:
#   setsid bash bench/gpu/peers.sh >/tmp/run.log 2>&1 < /dev/null &
# .device/wheels: kbuild's build extra for Python 3.12, rich and pygments for the table, liger_kernel
# 0.8.5 (pure Python, needs torch >= 2.1.2 and triton, both the image's). Results in /tmp/run/P/
# (peers.json, log) and, when $OUT is set, copied there.
set -uo pipefail
source bench/gpu/harness.sh || exit 1
carried && fresh_run P && snapshot && wheels --log $run/P/log $BUILD_EXTRA_WHEELS rich pygments filelock liger_kernel || exit 1
device_env KBUILD_CACHE=/tmp/kbcache
# builds name their sources by commit: each kernel a repository of its own
for k in rmsnorm activation rotary; do rm -rf kernels/$k/build kernels/$k/.kbuild && as_repo kernels/$k; done
{
  gpu_line
  t0=$(date +%s)
  kbuild build kernels/rmsnorm --variant torch211-cxx11-cu130-x86_64-linux --cuda-archs 9.0a -j 16 2>&1 | tail -n 3
  kbuild build kernels/activation --variant torch-stable-abi210-cu130-x86_64-linux --cuda-archs 9.0a -j 16 2>&1 | tail -n 3
  kbuild build kernels/rotary 2>&1 | tail -n 2
  echo "builds: $(( $(date +%s) - t0 )) s"
  # each kernel's own suite on this GPU first: a figure of a kernel that fails its tests means nothing
  if [ "${TESTS:-1}" = 1 ]; then
    t0=$(date +%s)
    for k in ${TEST_KERNELS:-rmsnorm activation rotary}; do kbuild test kernels/$k --timeout 150 2>&1 | tail -n 2; done
    echo "tests: $(( $(date +%s) - t0 )) s"
  fi
  python bench/peers.py --device cuda ${TOKENS:+--tokens $TOKENS} ${HIDDEN:+--hidden $HIDDEN} ${SHAPES:+--shapes $SHAPES} ${TIMING:+--timing $TIMING} \
    ${DTYPES:+--dtypes $DTYPES} ${WORKLOADS:+--workloads $WORKLOADS} --json $run/P/peers.json
  echo "exit $?"
} >> $run/P/log 2>&1
bring_back $run/P/log $run/P/peers.json
tail -n 80 $run/P/log
touch $run/P/done $run/done
