#!/usr/bin/env bash
# carry: .device/wheels .device/corpus/flash-attn2 .device/prebuilt/paged-attention
# Issue 9's GPU work left after run 5, for a one-GPU nvidia-h200 (16 vCPUs), detached with
# `setsid` so it outlives one 10-minute device call; bench/gpu/collect.sh waits and brings it back.
#   C  flash-attn2 built here on every core (nice 0), then its -k subset on the GPU (xdist -n 4):
#      780 of the suite's 204,646 cases (counted with --collect-only against the CPU variant), one
#      head dim (128) across every test function: fwd/bwd, (var)len, causal, local, alibi, splitkv,
#      overflow, transpose, raw.
#   B  meanwhile, paged-attention (prebuilt in .device/prebuilt) -k subset on the same GPU, serial,
#      nice 10: head size 128 of test_paged_attention (v1 and v2, every dtype/alibi/block/kv-cache
#      dtype: 96 cases) and the 1024-block, block-size-16 cases of test_cache.py.
# The full suites do not fit a session beside flash-attn2's ~1200 s build (run 5: > 1650 s).
#   setsid bash bench/gpu/corpus_flash_attn2.sh >/tmp/run.log 2>&1 < /dev/null &
set -uo pipefail
source bench/gpu/harness.sh || exit 1
carried && fresh_run B C && snapshot && wheels $CORPUS_WHEELS || exit 1
device_env
lane_facts
counts_line > $run/machine

( export OUT=$run/B CUDA_VISIBLE_DEVICES=0 TEST_TIMEOUT=1500 PREBUILT=.device/prebuilt
  export PYTEST_ARGS_paged_attention='-k "(test_paged_attention and -128-) or (test_cache and -1024-16-)"'
  WORK=/tmp/wsB nice -n 10 bash bench/gpu/corpus.sh 9.0a paged-attention > /dev/null 2>&1
  touch $run/B/done ) &

( export OUT=$run/C CUDA_VISIBLE_DEVICES=0 TEST_TIMEOUT=1500 JOBS=$(nproc)
  export PYTEST_ARGS_flash_attn2="$(xdist 4) -k \"(test_flash_attn_qkvpacked and -128-128-) or (test_flash_attn_output and 0.0-0.0-113-203-128- and dtype0) or (test_flash_attn_varlen_output and 0.0-0.0-113-203-128- and dtype0) or (test_flash_attn_causal and -128-) or (test_flash_attn_splitkv and -128-False-False-False-False-dtype0) or overflow or transpose or test_flash_attn_raw or (test_flash_attn_varlen_causal and None- and -128- and dtype0) or (test_flash_attn_deterministic and -128- and dtype0)\""
  WORK=/tmp/wsC bash bench/gpu/corpus.sh 9.0a flash-attn2 > /dev/null 2>&1
  touch $run/C/done ) &
wait
touch $run/done
