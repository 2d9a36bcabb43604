#!/usr/bin/env bash
# Issue 22's device run: the TRL page's attention path on a one-GPU nvidia-h200 (16 vCPUs), all on
# one machine, detached with `setsid` (the build alone is ~20 minutes); bench/gpu/collect.sh waits
# and brings it back (call it again within 30 s of the last call's end, or the machine goes back).
#   F  kbuild builds ../shared/corpus/flash-attn2 unchanged (carried as .device/corpus/flash-attn2)
#      for this GPU: `--cuda-archs 9.0a`, the torch-stable-abi210-cu130 variant, -j 16, no cache.
#   T  `kbuild hub serve` (token file mode 0600, kernels-community a trusted org) on 127.0.0.1;
#      `kbuild publish --allow-partial-archs` puts the build on branch v3 of
#      kernels-community/flash-attn2; then bench/gpu/trl_attention.py with HF_ENDPOINT on it:
#      one Qwen3-shaped training step per attention (MHA, GQA) x implementation (sdpa, eager, the
#      hub kernel) at S=4096, then time-to-ready cold and warm through Hugging Face's `kernels`
#      (0.16.2, what the device's transformers 5.17 accepts) and through kbuild's loader
#      (bench/gpu/trl_attention_lane.sh: a later call can run it again from the synced tree).
#   P  while F compiles: the first-party activation (CUDA, 9.0a) built, published over HTTP and
#      loaded by both loaders, so a broken publish or load path shows within minutes, not after F.
# Publishing runs with huggingface_hub >= 2.3 from .device/wheels/pub (2.4.0, httpx2, httpcore2,
# truststore): the image's 1.33.0 (pinned below 2.0 by transformers 5.17) cannot commit to kernel
# repos (run 9: the first try failed there); transformers keeps the image's own.
# Run 10 (2026-12-02) measured everything; its outputs are bench/gpu/results/run10/, summed up in bench/RESULTS.md.
# Carry: .device/clean (`git archive HEAD`), .device/wheels (pyelftools, auditwheel, abi3info,
# starlette, uvicorn, shtab, kernels 0.16.2, kernels-data 0.16.2, tomlkit, nvidia-cutlass 3.6,
# pub/) and .device/corpus/flash-attn2.
#   setsid bash bench/gpu/trl_attention.sh >/tmp/run.log 2>&1 < /dev/null &
set -uo pipefail
run=/tmp/run; rm -rf $run /tmp/site /tmp/snap /tmp/fa /tmp/hub /tmp/hfhome /tmp/kbcache; mkdir -p $run/F $run/T $run/P
# kbuild as committed (.device/clean: `git archive HEAD`), not the working tree, which helpers may be editing
cp -r .device/clean /tmp/snap && cp -r .device /tmp/snap/ && cd /tmp/snap || exit 1
here=$PWD
date +%s > $run/start
python -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
  .device/wheels/{pyelftools,auditwheel,abi3info,starlette,uvicorn,shtab,kernels,tomlkit}*.whl > $run/setup 2>&1 || exit 1
python -m pip install -q --no-index --no-deps --no-compile --target /tmp/site-pub .device/wheels/pub/*.whl >> $run/setup 2>&1 || exit 1
export PYTHONPATH=$here:/tmp/site CI=1 PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_FIND_LINKS=$here/.device/wheels
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ldd --version | head -1 > $run/glibc
{ echo "$(nvidia-smi -L | wc -l) GPU(s), $(nproc) vCPUs"; python -c "import torch, transformers, kernels; print('torch', torch.__version__, 'transformers', transformers.__version__, 'kernels', kernels.__version__)"; } > $run/machine 2>&1
kbuild() { python -m builder.commands.main "$@"; }

port=8765; hub=http://127.0.0.1:$port
(umask 077; python -c "import secrets; print('kb_' + secrets.token_hex(16))" > /tmp/hub.token)
kbuild hub serve --root /tmp/hub --port $port --token-file /tmp/hub.token --trusted-org kernels-community --trusted-org kbuild > $run/serve.log 2>&1 &
python - <<EOF || exit 1  # wait for the server to listen
import socket, time
for _ in range(100):
    try:
        socket.create_connection(("127.0.0.1", $port), 1).close(); break
    except OSError:
        time.sleep(0.2)
EOF
export run HUB=$hub HF_ENDPOINT=$hub KBUILD_TRUSTED_ORGS=kernels-community@$hub,kbuild@$hub HF_HOME=/tmp/hfhome KBUILD_CACHE=/tmp/kbcache
publish() { HF_TOKEN=$(cat /tmp/hub.token) PYTHONPATH=/tmp/site-pub:$PYTHONPATH python -m builder.commands.main publish --hub $HUB "$@"; }
export -f publish

( mkdir -p /tmp/p && cp -r kernels/activation /tmp/p/ && cd /tmp/p/activation && rm -rf build .kbuild && git init -q && git add -A &&
  git -c user.email=kbuild@localhost -c user.name=kbuild commit -qm act && cd $here &&
  kbuild build /tmp/p/activation --cuda-archs 9.0a --variant torch-stable-abi210-cu130-x86_64-linux -j 1 &&
  publish /tmp/p/activation --allow-partial-archs && echo "P publish ok" &&
  python -c "import kernels, torch; k = kernels.get_kernel('kbuild/activation', version=1); x = torch.randn(8, 64, device='cuda'); print('P hf kernels', k.__file__, k.silu_and_mul(x).shape)" &&
  python -c "import kbuild, torch; k = kbuild.get_kernel('kbuild/activation@v1'); x = torch.randn(8, 64, device='cuda'); print('P kbuild', k.__file__, k.silu_and_mul(x).shape)"
  echo "exit $?"; touch $run/P/done ) > $run/P/log 2>&1 &

mkdir -p /tmp/fa && cp -r .device/corpus/flash-attn2 /tmp/fa/ &&
  (cd /tmp/fa/flash-attn2 && git init -q && git add -A && git -c user.email=kbuild@localhost -c user.name=kbuild commit -qm fa2)
t0=$(date +%s)
kbuild build /tmp/fa/flash-attn2 --cuda-archs 9.0a --variant torch-stable-abi210-cu130-x86_64-linux -j 16 > $run/F/log 2>&1
echo "exit $? build wall $(( $(date +%s) - t0 )) s" >> $run/F/log
du -sh /tmp/fa/flash-attn2/build/* >> $run/F/log 2>&1
cp /tmp/fa/flash-attn2/build/*/metadata.json $run/F/ 2>/dev/null
touch $run/F/done

bash bench/gpu/trl_attention_lane.sh
touch $run/done
