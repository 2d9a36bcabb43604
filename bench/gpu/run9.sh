#!/usr/bin/env bash
# Issue 22's device run: the TRL page's attention path on a one-GPU nvidia-h200 (16 vCPUs), all on
# one machine, detached with `setsid` (the build alone is ~20 minutes); bench/gpu/collect.sh waits
# and brings it back (call it again within 30 s of the last call's end, or the machine goes back).
#   F  kbuild builds ../shared/corpus/flash-attn2 unchanged (carried as .device/corpus/flash-attn2)
#      for this GPU: `--cuda-archs 9.0a`, the torch-stable-abi210-cu130 variant, -j 16, no cache.
#   T  `kbuild hub serve` (token file mode 0600, kernels-community a trusted org) on 127.0.0.1;
#      `kbuild publish --allow-partial-archs` puts the build on branch v3 of
#      kernels-community/flash-attn2; then bench/gpu/trl_attention.py with HF_ENDPOINT on it:
#      time-to-ready cold and warm through Hugging Face's `kernels` (0.16.2, what the device's
#      transformers 5.17 accepts) and through kbuild's loader, then one Qwen3-shaped training step
#      per attention (MHA, GQA) x implementation (sdpa, eager, the hub kernel) at S=4096.
# Carry: .device/clean, .device/wheels (pyelftools, auditwheel, abi3info, starlette, uvicorn, shtab, kernels 0.16.2,
# kernels-data 0.16.2, tomlkit, nvidia-cutlass 3.6) and .device/corpus/flash-attn2.
#   setsid bash bench/gpu/run9.sh >/tmp/run.log 2>&1 < /dev/null &
set -uo pipefail
run=/tmp/run; rm -rf $run /tmp/site /tmp/snap /tmp/fa /tmp/hub /tmp/hfhome /tmp/kbcache; mkdir -p $run/F $run/T
# kbuild as committed (.device/clean: `git archive HEAD`), not the working tree, which helpers may be editing
cp -r .device/clean /tmp/snap && cp -r .device /tmp/snap/ && cd /tmp/snap || exit 1
here=$PWD
date +%s > $run/start
python -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
  .device/wheels/{pyelftools,auditwheel,abi3info,starlette,uvicorn,shtab,kernels,tomlkit}*.whl > $run/setup 2>&1 || exit 1
export PYTHONPATH=$here:/tmp/site CI=1 PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_FIND_LINKS=$here/.device/wheels
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ldd --version | head -1 > $run/glibc
{ echo "$(nvidia-smi -L | wc -l) GPU(s), $(nproc) vCPUs"; python -c "import torch, transformers, kernels; print('torch', torch.__version__, 'transformers', transformers.__version__, 'kernels', kernels.__version__)"; } > $run/machine 2>&1
kbuild() { python -m builder.cli "$@"; }

mkdir -p /tmp/fa && cp -r .device/corpus/flash-attn2 /tmp/fa/ &&
  (cd /tmp/fa/flash-attn2 && git init -q && git add -A && git -c user.email=kbuild@localhost -c user.name=kbuild commit -qm fa2)
t0=$(date +%s)
kbuild build /tmp/fa/flash-attn2 --cuda-archs 9.0a --variant torch-stable-abi210-cu130-x86_64-linux -j 16 --no-cache > $run/F/log 2>&1
echo "exit $? build wall $(( $(date +%s) - t0 )) s" >> $run/F/log
du -sh /tmp/fa/flash-attn2/build/* >> $run/F/log 2>&1
cp /tmp/fa/flash-attn2/build/*/metadata.json $run/F/ 2>/dev/null
touch $run/F/done

port=8765; hub=http://127.0.0.1:$port
(umask 077; python -c "import secrets; print('kb_' + secrets.token_hex(16))" > /tmp/hub.token)
kbuild hub serve --root /tmp/hub --port $port --token-file /tmp/hub.token --trusted-org kernels-community > $run/T/serve.log 2>&1 &
python - <<EOF || exit 1  # wait for the server to listen
import socket, time
for _ in range(100):
    try:
        socket.create_connection(("127.0.0.1", $port), 1).close(); break
    except OSError:
        time.sleep(0.2)
EOF
t0=$(date +%s)
HF_TOKEN=$(cat /tmp/hub.token) kbuild publish /tmp/fa/flash-attn2 --hub $hub --allow-partial-archs --json > $run/T/publish.json 2> $run/T/publish.err
echo "publish exit $? in $(( $(date +%s) - t0 )) s" > $run/T/log
export HF_ENDPOINT=$hub KBUILD_TRUSTED_ORGS=kernels-community@$hub HF_HOME=/tmp/hfhome KBUILD_CACHE=/tmp/kbcache
for loader in hf kbuild; do for mode in cold warm; do
  python bench/gpu/trl_attention.py --ready $mode --loader $loader --out $run/T/ready_${loader}_$mode.json >> $run/T/log 2>&1
done; done
python bench/gpu/trl_attention.py --seq 4096 --layers 4 --steps 3 --out $run/T/train.json >> $run/T/log 2>&1
echo "train exit $?" >> $run/T/log
touch $run/T/done $run/done
