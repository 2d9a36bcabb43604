#!/usr/bin/env bash
# carry: .device/wheels .device/corpus
# Issue 36, second H200 run (after build_for_my_gpu.sh): flash-mla again with kbuild test's plugin taking its
# unversioned get_kernel call and its script routines as skips that say why; punica-sgmv with the
# CUTLASS 3.8 wheel run12 lacked; and what the pre-staging checks cost on each library
# (bench/gpu/check_cost.py). Detached like build_for_my_gpu.sh; bench/gpu/collect.sh brings /tmp/run back.
set -uo pipefail
source bench/gpu/harness.sh || exit 1
carried && fresh_run M P && snapshot && wheels pyelftools auditwheel abi3info kernels tomlkit || exit 1
device_env TEST_TIMEOUT=600
echo "$(counts_line), $(versions_line torch)" > $run/machine
lane() { local name=$1; shift; local t0=$(date +%s)
  OUT=$run/$name WORK=/tmp/ws-$name bash bench/gpu/corpus.sh "$@" > /dev/null 2>&1
  echo "$(( $(date +%s) - t0 ))" > $run/$name/seconds
  for so in /tmp/ws-$name/*/.kbuild/*/_*.so; do python bench/gpu/check_cost.py $so >> $run/$name/check_cost.jsonl 2>&1; done
  touch $run/$name/done; }
lane M 9.0a flash-mla
lane P 9.0a punica-sgmv
touch $run/done
