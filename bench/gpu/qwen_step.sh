#!/usr/bin/env bash
# carry: .device/wheels
# Issue 33 on a one-GPU nvidia-h200: the Qwen3-0.6B-shaped training step, kbuild beside Liger-Kernel layer for
# layer, and what held the memory. kernels/rmsnorm built here for this GPU (torch211-cxx11-cu130, 9.0a) and
# kernels/rotary (Triton, torch-cuda), published to a local git hub, served by `kbuild hub serve` (0600 token
# file); bench/gpu/qwen_step.py then runs eager, kbuild (RMSNorm and rotary_pos_emb through HF_ENDPOINT),
# liger_same (Liger's RMSNorm and rope) and liger_default
# (Liger's defaults, FLCE included) in one process. Modeled on layer_training.sh.
# .device/wheels: the `build` extra's as in layer_training.sh, and liger_kernel 0.8.5. The image has
# no `kernels` 0.16 (transformers 5.17 refuses the carried 0.17.2), so qwen_step.py takes kbuild.kernelize.
# Estimate: ~2 min (pip 10 s, build ~15 s as in run14, publish + serve 10 s, four configs x (model build
# ~3 s + 7 steps ~0.2-0.5 s + Triton JIT for Liger) ~40-60 s); run it with timeout_s=300.
# Results: /tmp/run/Q (qwen_step.json, log, machine) and, when $OUT is set, copied there.
set -uo pipefail
source bench/gpu/harness.sh || exit 1
carried && fresh_run Q && rm -rf /tmp/hub /tmp/kbcache /tmp/hfhome || exit 1
snapshot && wheels --log $run/Q/log $BUILD_EXTRA_WHEELS liger_kernel || exit 1
device_env KBUILD_CACHE=/tmp/kbcache HF_HOME=/tmp/hfhome
{ gpu_line; versions_line torch transformers triton; versions_line liger_kernel; } > $run/Q/machine 2>&1
for k in rmsnorm rotary; do rm -rf kernels/$k/build kernels/$k/.kbuild && as_repo kernels/$k >> $run/Q/log 2>&1; done
t0=$(date +%s)
kbuild build kernels/rmsnorm --variant torch211-cxx11-cu130-x86_64-linux --cuda-archs 9.0a -j 16 >> $run/Q/log 2>&1
echo "build exit $? $(( $(date +%s) - t0 )) s" >> $run/Q/log
kbuild build kernels/rotary >> $run/Q/log 2>&1; echo "rotary build exit $?" >> $run/Q/log
kbuild publish kernels/rmsnorm --hub /tmp/hub --allow-partial-archs >> $run/Q/log 2>&1; echo "publish exit $?" >> $run/Q/log
kbuild publish kernels/rotary --hub /tmp/hub >> $run/Q/log 2>&1; echo "rotary publish exit $?" >> $run/Q/log
port=8765; hub=http://127.0.0.1:$port
hub_token /tmp/hub.token
hub_serve $port $run/Q/serve.log --root /tmp/hub --token-file /tmp/hub.token --trusted-org kbuild
t0=$(date +%s)
HF_ENDPOINT=$hub KBUILD_TRUSTED_ORGS=kbuild@$hub python bench/gpu/qwen_step.py $run/Q/qwen_step.json >> $run/Q/log 2>&1
echo "qwen_step exit $? $(( $(date +%s) - t0 )) s" >> $run/Q/log
kill $HUB_PID 2>/dev/null
tail -n 5 $run/Q/serve.log >> $run/Q/log
touch $run/Q/done $run/done
bring_back -r $run/Q
tail -n 3 $run/Q/log
