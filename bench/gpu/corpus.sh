#!/usr/bin/env bash
# carry: .device/wheels .device/corpus (or, with PREBUILT=DIR, that folder instead of .device/corpus)
# The development-set corpus on the H200 (device tool): the named kernels of the corpus (bench/corpus.md),
# unchanged (carried as .device/corpus), built by kbuild for this machine's torch in one ninja
# graph (a workspace of just them), then each kernel's own tests on the GPU.
#
#   bench/gpu/corpus.sh ARCHS KERNEL...      e.g. bench/gpu/corpus.sh 9.0a relu causal-conv1d
#
# which runs, in /tmp/corpus (a git repo of the kernels, so builds have a source id):
#   kbuild build /tmp/corpus --cuda-archs ARCHS --variant torch211-cxx11-cu130-x86_64-linux \
#       --variant torch-stable-abi210-cu130-x86_64-linux --variant torch-stable-abi29-cu130-x86_64-linux -j 16
#   kbuild test /tmp/corpus/KERNEL --variant <its variant> [-- $PYTEST_ARGS]     (each kernel)
# It is also the lane of the harnesses that build corpus kernels (build_for_my_gpu*.sh, corpus_x2.sh,
# corpus_flash_attn2.sh, scale_and_nvcc_parallel.sh): then it runs in their copy of the checkout, with
# their wheels. WORK names another workspace folder (two lanes can build and test side by side, each with its
# own CUDA_VISIBLE_DEVICES); PYTEST_ARGS_<kernel, - as _> gives one kernel its own pytest
# arguments, shell-quoted (e.g. PYTEST_ARGS_flash_attn2='-k "causal and not varlen"'); TEST_TIMEOUT
# caps each suite (default 900 s). PREBUILT=DIR tests kernels built elsewhere for this machine's
# torch (DIR holds each kernel's folder with its build/, e.g. built off-device against the same
# torch release): no build step, the rows say "prebuilt".
# CUTLASS and Python packages come from the carried wheels (.device/wheels): no internet there.
# Output: $OUT/corpus.log (everything), $OUT/corpus.jsonl (one line per kernel), test logs.
set -uo pipefail
source bench/gpu/harness.sh || exit 1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee -a "$OUT/corpus.log") 2>&1
needs .device/wheels "${PREBUILT:-.device/corpus}" && snapshot || exit 1
archs=$1; shift
[ -d /tmp/site/auditwheel ] || wheels $CORPUS_WHEELS || exit 1
device_env
work=${WORK:-/tmp/corpus}
if [ ! -d $work/.git ]; then
  rm -rf $work; cp -r ${PREBUILT:-.device/corpus} $work
  as_repo $work
fi
members=$(printf '"%s", ' "$@")
printf '[workspace]\nmembers = [%s]\n' "${members%, }" > $work/build.toml
tag=$(python -c "import torch; v=torch.__version__.split('+')[0].split('.'); print(f'torch{v[0]}{v[1]}')")
variants="$tag-cxx11-cu130-x86_64-linux torch-stable-abi210-cu130-x86_64-linux torch-stable-abi29-cu130-x86_64-linux"
echo "== $(nvidia-smi --query-gpu=name --format=csv,noheader), $(nproc) cores; --cuda-archs $archs: $*"
start=$(date +%s)
if [ -n "${PREBUILT:-}" ]; then
  for k in "$@"; do for v in $variants; do
    [ -f $work/$k/build/$v/metadata.json ] && echo "prebuilt $k/$v -" ; done; done | tee $work.build.out
else
  kbuild build $work --cuda-archs "$archs" $(printf -- "--variant %s " $variants) -j "${JOBS:-$(nproc)}" 2>&1 | tee $work.build.out
  echo "== graph wall time: $(( $(date +%s) - start )) s"
fi
for k in "$@"; do
  args=()
  row=$(grep -E "^(built|unchanged|failed|prebuilt) +$k/" $work.build.out | head -1)
  v=$(echo "$row" | awk '{print $2}' | cut -d/ -f2); status=$(echo "$row" | awk '{print $1}')
  secs=$(echo "$row" | awk '{print $3}')
  summary="not run"
  if [ "$status" = built ] || [ "$status" = unchanged ] || [ "$status" = prebuilt ]; then
    own=PYTEST_ARGS_${k//-/_}; eval "args=(${!own:-${PYTEST_ARGS:-}})"
    tstart=$(date +%s)
    kbuild test $work/$k --variant "$v" --timeout "${TEST_TIMEOUT:-900}" -- "${args[@]}"
    rc=$?; echo "== $k tests: $(( $(date +%s) - tstart )) s (exit $rc)"
    summary=$(grep -E "[0-9]+ (passed|failed|skipped|error)|no tests ran" $work/$k/.kbuild/$v/test.log | tail -1 | sed 's/=//g; s/^ *//; s/ *$//')
    cp $work/$k/.kbuild/$v/test.log "$OUT/$k.test.log"
  else
    cp $work/$k/.kbuild/*/build.log "$OUT/$k.build.log" 2>/dev/null
  fi
  python -c "import json,sys; print(json.dumps(dict(zip(['kernel','variant','archs','build','build_s','tests','pytest_args'], sys.argv[1:]))))" \
    "$k" "$v" "$archs" "${status:-missing}" "$secs" "$summary" "${args[*]:-}" | tee -a "$OUT/corpus.jsonl"
done
