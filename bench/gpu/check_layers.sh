#!/usr/bin/env bash
# carry: .device/wheels .device/kc
# Issue 50 on the GPU: `kbuild check-layers` on the layers transformers 5.25 binds by default, each kernel built
# unchanged by kbuild for the image's torch at 9.0a: kernels-community rotary v2 (rotary_pos_emb ->
# apply_rotary_transformers, bound for training and inference on CUDA) and liger-kernels (RMSNorm -> LigerRMSNorm),
# from the snapshot the corpus came from; then kbuild's own rmsnorm (RMSNorm -> RMSNorm) and rotary
# (rotary_pos_emb -> RotaryPosEmb). fp32 and bf16, forward and backward, a tiny random Llama.
# .device/wheels: transformers 5.25.0, tokenizers 0.23.3, kernels 0.19.1, huggingface_hub 2.4.0 and its own
# dependencies, kbuild's build extra (harness.sh); .device/kc: rotary and liger-kernels from the corpus.
# Estimate: pip 15 s, builds ~3 min at -j 16, each check ~30 s. Detached; results in /tmp/run/L.
set -uo pipefail
source bench/gpu/harness.sh || exit 1
carried && fresh_run L || exit 1
log=$run/L/log
snapshot && wheels --all --log $log || exit 1
device_env KBUILD_CACHE=/tmp/kbcache
step() { local t0=$(date +%s); "$@" >> $log 2>&1; local rc=$?; echo "[$rc, $(( $(date +%s) - t0 )) s] $*" | tee -a $run/L/steps; return $rc; }
{ gpu_line; versions_line torch transformers kernels huggingface_hub; } > $run/L/machine 2>&1
rm -rf /tmp/kc-*
for k in rotary liger-kernels; do cp -r .device/kc/$k /tmp/kc-$k && as_repo /tmp/kc-$k; done
step kbuild build /tmp/kc-rotary --cuda-archs 9.0a -j 16
step kbuild build /tmp/kc-liger-kernels
step kbuild build kernels/rmsnorm --cuda-archs 9.0a -j 16
step kbuild build kernels/rotary
check() {  # check NAME ARGS...: the table and the JSON of one check
  local name=$1; shift
  kbuild check-layers "$@" --dtype float32 --dtype bfloat16 --json $run/L/$name.json > $run/L/$name.out 2>&1
  echo "$name rc=$?" | tee -a $run/L/steps
}
check kc-rotary /tmp/kc-rotary
check kc-liger-kernels /tmp/kc-liger-kernels
check kbuild-rmsnorm kernels/rmsnorm --map RMSNorm=RMSNorm
check kbuild-rotary kernels/rotary --map rotary_pos_emb=RotaryPosEmb
touch $run/L/done
