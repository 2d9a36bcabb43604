#!/usr/bin/env bash
# carry: .device/wheels .device/kc
# Issue 50 on the GPU: `kbuild check-layers` on the layers transformers 5.25 binds by default, each kernel built
# unchanged by kbuild for the image's torch at 9.0a: kernels-community rotary v2 (rotary_pos_emb ->
# apply_rotary_transformers, bound for training and inference on CUDA), liger-kernels (RMSNorm -> LigerRMSNorm) and
# activation v1 (SiLU -> Silu and five GELUs, inference only; a Llama has the SiLU), from the snapshot the corpus came
# from (kernels-community 40d4194f; activation is not in the corpus: `git archive` of that commit's activation/);
# then kbuild's own rmsnorm (RMSNorm -> RMSNorm) and rotary
# (rotary_pos_emb -> RotaryPosEmb). fp32 and bf16, forward and backward, a tiny random Llama.
# .device/wheels: transformers 5.25.0, tokenizers 0.23.3, kernels 0.19.1, huggingface_hub 2.4.0 and its own
# dependencies, kbuild's build extra (harness.sh); .device/kc: rotary, liger-kernels and activation.
# Estimate: pip 15 s, builds ~4 min at -j 16, each check ~30 s. Results in /tmp/run/L. ONLY="activation ..." runs
# those lanes alone (kc-NAME for kernels-community's, kbuild-NAME for kbuild's).
set -uo pipefail
source bench/gpu/harness.sh || exit 1
carried && fresh_run L || exit 1
log=$run/L/log
snapshot && wheels --all --log $log || exit 1
device_env KBUILD_CACHE=/tmp/kbcache
step() { local t0=$(date +%s); "$@" >> $log 2>&1; local rc=$?; echo "[$rc, $(( $(date +%s) - t0 )) s] $*" | tee -a $run/L/steps; return $rc; }
{ gpu_line; versions_line torch transformers kernels huggingface_hub; } > $run/L/machine 2>&1
wanted() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }
lane() {  # lane NAME FOLDER BUILD-ARGS -- CHECK-ARGS: build it, then the table and the JSON of one check
  local name=$1 dir=$2; shift 2
  local build=() ; while [ $# -gt 0 ] && [ "$1" != -- ]; do build+=("$1"); shift; done; shift
  wanted $name || return 0
  step kbuild build $dir "${build[@]}" || return 1
  kbuild check-layers $dir "$@" --dtype float32 --dtype bfloat16 --json $run/L/$name.json > $run/L/$name.out 2>&1
  echo "$name rc=$?" | tee -a $run/L/steps
}
rm -rf /tmp/kc-*
for k in rotary liger-kernels activation; do cp -r .device/kc/$k /tmp/kc-$k && as_repo /tmp/kc-$k; done
lane kc-rotary /tmp/kc-rotary --cuda-archs 9.0a -j 16 --
lane kc-liger-kernels /tmp/kc-liger-kernels --
lane kc-activation /tmp/kc-activation --cuda-archs 9.0a -j 16 --
# transformers binds activation's layers for inference only; mapped for training too, its CUDA variant's
# backward is checked as well (the build above is reused)
lane kc-activation-training /tmp/kc-activation --cuda-archs 9.0a -j 16 -- --map SiLU=Silu \
  --variant torch-stable-abi210-cu130-x86_64-linux
lane kbuild-rmsnorm kernels/rmsnorm --cuda-archs 9.0a -j 16 -- --map RMSNorm=RMSNorm
lane kbuild-rotary kernels/rotary -- --map rotary_pos_emb=RotaryPosEmb
touch $run/L/done
