#!/usr/bin/env bash
# carry: .device/wheels .device/corpus
# Issue 36 on a one-GPU nvidia-h200 (16 vCPUs, torch 2.11.0+cu130): "build for my GPU" as a new user
# runs it, kernels-community projects unchanged (`.device/corpus`: sage-attention and flash-mla from
# kernels-community 40d4194f48b6, and five kernels of the development-set corpus, bench/corpus.md), each
# lane with bench/gpu/corpus.sh (build at the archs given, then the kernel's own suite on the GPU):
#   S1  sage-attention at 9.0a: its binding calls its sm80, sm89 and sm100 sections unguarded, so
#       kbuild must refuse the variant in one line naming the archs to pass;
#   M   flash-mla at 9.0a (its sm100 section left out), then its suite;
#   S2  sage-attention at exactly the archs S1's refusal named, then its suite;
#   C   relu tinygrad-rms rotary punica-sgmv causal-conv1d at 9.0a, one graph, then their suites.
# Detached (setsid) so it outlives one device call; bench/gpu/collect.sh waits and brings /tmp/run back.
#   setsid bash bench/gpu/build_for_my_gpu.sh >/tmp/run.log 2>&1 < /dev/null &
set -uo pipefail
source bench/gpu/harness.sh || exit 1
carried && fresh_run S1 M S2 C && snapshot && wheels pyelftools auditwheel abi3info kernels tomlkit || exit 1
device_env TEST_TIMEOUT=600
echo "$(counts_line), $(versions_line torch)" > $run/machine
lane() { local name=$1; shift; local t0=$(date +%s)
  OUT=$run/$name WORK=/tmp/ws-${WS:-$name} bash bench/gpu/corpus.sh "$@" > /dev/null 2>&1
  echo "$(( $(date +%s) - t0 ))" > $run/$name/seconds; touch $run/$name/done; }

lane S1 9.0a sage-attention
# the archs the refusal names (the whole line is in S1/corpus.log)
archs=$(grep -o 'build with --cuda-archs "[^"]*"' $run/S1/corpus.log | head -1 | cut -d'"' -f2)
echo "${archs:-none}" > $run/S2/archs_from_refusal
lane M 9.0a flash-mla
[ -n "$archs" ] && WS=S1 lane S2 "$archs" sage-attention
lane C 9.0a relu tinygrad-rms rotary punica-sgmv causal-conv1d
touch $run/done
