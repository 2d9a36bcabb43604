#!/usr/bin/env bash
# carry: .device/wheels .device/corpus/paged-attention .device/corpus/flash-attn2 .device/prebuilt .device/ml
# Issue 9's remaining H200 work as one detached run on an nvidia-h200-x2 machine (2 GPUs, 32
# vCPUs), started with `setsid` so it outlives one 10-minute device call; bench/gpu/collect.sh
# waits for it and brings the logs back. Four lanes side by side:
#   A  taskset -c 0-11: bench/nvcc_parallel.py on paged-attention's heaviest .cu (full default
#      arch list, kbuild vs torch.utils.cpp_extension.load). No other lane runs on these 12 vCPUs.
#      (causal-conv1d's unit was measured in run 4: bench/gpu/results/corpus_run4/.)
#   E  then B, GPU 1, vCPUs 12-31, nice 5: first the first-party kernels built here against the
#      glibc 2.28 sysroot (`kbuild build --manylinux 2_28`, carried as .device/ml: activation's
#      stable-ABI 2.10 and rmsnorm's torch 2.11 CUDA variants) run their own tests (issue 11);
#   B  then paged-attention's full suite, carried prebuilt in .device/prebuilt (built off the
#      device against the same torch release, 2.11.0+cu130).
#   C  GPU 0, vCPUs 12-31, nice 19: corpus.sh 9.0a flash-attn2 built here, then its -k subset.
#   D  GPU 0, vCPUs 12-31, nice 5: megablocks' full suite, serially (prebuilt; its distributed
#      tests share fixed ports, so they cannot run under pytest-xdist), then nvfp4-gemm (10.0a).
# The B and C suites run under pytest-xdist when the machine has it (-n per lane).
# Output: /tmp/run/{A,B,C,D}/..., /tmp/run/done when all lanes have finished.
#   setsid bash bench/gpu/corpus_x2.sh >/tmp/run.log 2>&1 < /dev/null &
set -uo pipefail
source bench/gpu/harness.sh || exit 1
carried && fresh_run A B C D E && snapshot && wheels $CORPUS_WHEELS || exit 1
device_env
lane_facts

# On a one-GPU machine (16 vCPUs) every lane shares GPU 0 and all cores, flash-attn2's build gets
# the most (nice 0), and lane A is left out: its baseline outlasts a session there.
gpus=$(nvidia-smi -L | wc -l); last=$(( $(nproc) - 1 ))
if [ "$gpus" -gt 1 ]; then gpuB=1 cpus=12-$last niceC=19 jobsC=20; else gpuB=0 cpus=0-$last niceC=0 jobsC=$(nproc); fi
counts_line > $run/machine

mkdir -p /tmp/bc
[ "$gpus" -gt 1 ] && for k in paged-attention; do
  cp -r .device/corpus/$k /tmp/bc/$k && as_repo /tmp/bc/$k
done
[ "$gpus" -gt 1 ] && ( taskset -c 0-11 python bench/nvcc_parallel.py \
    /tmp/bc/paged-attention:paged-attention/attention/paged_attention_v2.cu \
    --out $run/A/nvcc_parallel.json > $run/A/log 2>&1; echo "exit $?" >> $run/A/log; touch $run/A/done ) &

( ( export OUT=$run/E CUDA_VISIBLE_DEVICES=$gpuB TEST_TIMEOUT=900 PREBUILT=.device/ml
    WORK=/tmp/wsE nice -n 5 taskset -c $cpus bash bench/gpu/corpus.sh 9.0 activation rmsnorm > /dev/null 2>&1
    touch $run/E/done )
  export OUT=$run/B CUDA_VISIBLE_DEVICES=$gpuB TEST_TIMEOUT=3000 PREBUILT=.device/prebuilt
  export PYTEST_ARGS_paged_attention="$(xdist 6)"
  WORK=/tmp/wsB nice -n 5 taskset -c $cpus bash bench/gpu/corpus.sh 9.0a paged-attention > /dev/null 2>&1
  touch $run/B/done ) &

( export OUT=$run/D CUDA_VISIBLE_DEVICES=0 TEST_TIMEOUT=3000 PREBUILT=.device/prebuilt
  WORK=/tmp/wsD nice -n 5 taskset -c $cpus bash bench/gpu/corpus.sh 9.0a megablocks > /dev/null 2>&1
  WORK=/tmp/wsD2 nice -n 5 taskset -c $cpus bash bench/gpu/corpus.sh 10.0a nvfp4-gemm > /dev/null 2>&1
  touch $run/D/done ) &

( export OUT=$run/C CUDA_VISIBLE_DEVICES=0 TEST_TIMEOUT=3000 JOBS=$jobsC
  export PYTEST_ARGS_flash_attn2="$(xdist 8) -k \"qkvpacked and -128- or test_flash_attn_causal or overflow or transpose or test_mha_varlen_fwd or test_flash_attn_raw\""
  WORK=/tmp/wsC nice -n $niceC taskset -c $cpus bash bench/gpu/corpus.sh 9.0a flash-attn2 > /dev/null 2>&1
  touch $run/C/done ) &
wait
touch $run/done
