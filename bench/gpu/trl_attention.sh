#!/usr/bin/env bash
# carry: .device/clean .device/wheels .device/corpus/flash-attn2
# Issue 22's device run: the TRL page's attention path on a one-GPU nvidia-h200 (16 vCPUs), all on
# one machine, detached with `setsid` (the build alone is ~20 minutes); bench/gpu/collect.sh waits
# and brings it back (call it again within 30 s of the last call's end, or the machine goes back).
#   F  kbuild builds the corpus's flash-attn2 unchanged (carried as .device/corpus/flash-attn2)
#      for this GPU: `--cuda-archs 9.0a`, the torch-stable-abi210-cu130 variant, -j 16, no cache.
#   T  `kbuild hub serve` (token file mode 0600, kernels-community a trusted org) on 127.0.0.1;
#      `kbuild publish --allow-partial-archs` puts the build on branch v3 of
#      kernels-community/flash-attn2; then bench/gpu/trl_attention.py with HF_ENDPOINT on it:
#      one Qwen3-shaped training step per attention (MHA, GQA) x implementation (sdpa, eager, the
#      hub kernel) at S=4096, then time-to-ready cold and warm through Hugging Face's `kernels`
#      (0.16.2, what the device's transformers 5.17 accepts) and through kbuild's loader
#      (bench/gpu/trl_attention_lane.sh, run as this script's last lane).
#   P  while F compiles: the first-party activation (CUDA, 9.0a) built, published over HTTP and
#      loaded by both loaders, so a broken publish or load path shows within minutes, not after F.
# Publishing runs with huggingface_hub >= 2.3 from .device/wheels/pub (2.4.0, httpx2, httpcore2,
# truststore): the image's 1.33.0 (pinned below 2.0 by transformers 5.17) cannot commit to kernel
# repos (run 9: the first try failed there); transformers keeps the image's own.
# Run 10 (2026-12-02) measured everything; its outputs are bench/gpu/results/run10/, summed up in bench/RESULTS.md.
# .device/clean: kbuild as committed (`git archive HEAD`); .device/wheels: pyelftools, auditwheel, abi3info,
# starlette, uvicorn, shtab, kernels 0.16.2, kernels-data 0.16.2, tomlkit, nvidia-cutlass 3.6, pub/.
#   setsid bash bench/gpu/trl_attention.sh >/tmp/run.log 2>&1 < /dev/null &
set -uo pipefail
source bench/gpu/harness.sh || exit 1
carried && fresh_run F T P && rm -rf /tmp/fa /tmp/hub /tmp/hfhome /tmp/hfhome-* /tmp/trl-model /tmp/kbcache || exit 1
# kbuild as committed (.device/clean: `git archive HEAD`), not the working tree, which helpers may be editing
snapshot .device/clean || exit 1
wheels --log $run/setup pyelftools auditwheel abi3info starlette uvicorn shtab kernels tomlkit || exit 1
wheels --log $run/setup --target /tmp/site-pub pub/ || exit 1
device_env
glibc_line > $run/glibc
{ counts_line; versions_line torch transformers kernels; } > $run/machine 2>&1

port=8765; hub=http://127.0.0.1:$port
hub_token /tmp/hub.token
hub_serve $port $run/serve.log --root /tmp/hub --token-file /tmp/hub.token --trusted-org kernels-community --trusted-org kbuild
export run HUB=$hub HF_ENDPOINT=$hub KBUILD_TRUSTED_ORGS=kernels-community@$hub,kbuild@$hub HF_HOME=/tmp/hfhome KBUILD_CACHE=/tmp/kbcache
publish() { HF_TOKEN=$(cat /tmp/hub.token) PYTHONPATH=/tmp/site-pub:$PYTHONPATH python -m builder.commands.main publish --hub $HUB "$@"; }
export -f publish

( mkdir -p /tmp/p && cp -r kernels/activation /tmp/p/ && rm -rf /tmp/p/activation/build /tmp/p/activation/.kbuild &&
  as_repo /tmp/p/activation &&
  kbuild build /tmp/p/activation --cuda-archs 9.0a --variant torch-stable-abi210-cu130-x86_64-linux -j 1 &&
  publish /tmp/p/activation --allow-partial-archs && echo "P publish ok" &&
  python -c "import kernels, torch; k = kernels.get_kernel('kbuild/activation', version=1); x = torch.randn(8, 64, device='cuda'); print('P hf kernels', k.__file__, k.silu_and_mul(x).shape)" &&
  python -c "import kbuild, torch; k = kbuild.get_kernel('kbuild/activation@v1'); x = torch.randn(8, 64, device='cuda'); print('P kbuild', k.__file__, k.silu_and_mul(x).shape)"
  echo "exit $?"; touch $run/P/done ) > $run/P/log 2>&1 &

mkdir -p /tmp/fa && cp -r .device/corpus/flash-attn2 /tmp/fa/ && as_repo /tmp/fa/flash-attn2
t0=$(date +%s)
kbuild build /tmp/fa/flash-attn2 --cuda-archs 9.0a --variant torch-stable-abi210-cu130-x86_64-linux -j 16 > $run/F/log 2>&1
echo "exit $? build wall $(( $(date +%s) - t0 )) s" >> $run/F/log
du -sh /tmp/fa/flash-attn2/build/* >> $run/F/log 2>&1
cp /tmp/fa/flash-attn2/build/*/metadata.json $run/F/ 2>/dev/null
touch $run/F/done

bash bench/gpu/trl_attention_lane.sh
touch $run/done
