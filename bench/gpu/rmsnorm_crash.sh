#!/usr/bin/env bash
# Bisect the rmsnorm segfault on the H200 (issue 2): kbuild-built torch211-cxx11-cu130 rmsnorm
# crashed when a failing TORCH_CHECK threw. Builds the variant, reruns the failing test alone
# and after the others, takes a gdb backtrace, then recompiles the binding with one kbuild flag
# changed at a time and reruns the test for each. Output: $OUT/rmsnorm_crash.log.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/rmsnorm_crash.log") 2>&1
python -c "import rich, ninja" 2>/dev/null || python -m pip install -q --no-index --find-links .device/wheels rich ninja
export PYTHONPATH=$PWD CI=1 KBUILD_TEST_DEVICE=${DEV:-cuda}
V=${V:-torch211-cxx11-cu130-x86_64-linux}
K=$PWD/kernels/rmsnorm
g++ --version | head -1; which gdb cuda-gdb
time python -m builder.commands.main build $K -j 16 --variant $V || exit 1
t() {  # run pytest on the variant folder $1 with the extra args; print the outcome
  local dir=$1 links; shift; links=$(mktemp -d); ln -s "$dir" "$links/rmsnorm"
  (cd $K && PYTHONPATH=$links timeout 300 python -X faulthandler -m pytest -q -p no:cacheprovider tests/test_rmsnorm.py "$@" 2>&1 | tail -25; echo "rc=${PIPESTATUS[0]}")
}
echo "== 1. the failing test alone"; t "$K/build/$V" -k bad_inputs
echo "== 2. whole file"; t "$K/build/$V" -x
echo "== 3. gdb backtrace"
if command -v gdb >/dev/null; then
  links=$(mktemp -d); ln -s "$K/build/$V" "$links/rmsnorm"
  (cd $K && PYTHONPATH=$links timeout 300 gdb -q -batch -ex run -ex bt -ex "info sharedlibrary" --args python -m pytest -q -p no:cacheprovider tests/test_rmsnorm.py -k bad_inputs 2>&1 | grep -v "^\[New Thread\|^\[Thread" | tail -80)
fi
echo "== 4. flag bisection (binding recompiled, relinked, test alone)"
cd $K/.kbuild
obj=$(ninja -f build.ninja -t targets all | grep "$V/obj/torch-ext/torch_binding.cpp.o:" | cut -d: -f1)
so=$(ls $PWD/$V/*.so)
ccmd=$(ninja -f build.ninja -t commands "$obj" | grep -F "torch_binding.cpp" | tail -1)
lcmd=$(ninja -f build.ninja -t commands "$so" | tail -1)
echo "compile: $ccmd"; echo "link: $lcmd"
variant() {  # name, sed expression applied to the compile command, sed expression for the link
  local name=$1 cs=$2 ls=$3 d=$K/bisect-$1
  rm -rf "$d"; cp -r "$K/build/$V" "$d"
  local c=$(echo "$ccmd" | sed -e "$cs" -e "s# -o [^ ]*\$# -o $d/b.o#" -e 's#^[^ ]*/bin/compile ##')
  local l=$(echo "$lcmd" | sed -e "$ls" -e "s#[^ ]*torch_binding.cpp.o#$d/b.o#" -e "s# -o [^ ]*\.so# -o $d/$(basename $so .so).abi3.so#")
  (eval "$c" && eval "$l") >"$d.build.log" 2>&1 || { echo "$name: BUILD FAILED"; tail -5 "$d.build.log"; return; }
  local r; r=$(t "$d" -x 2>&1 | tail -4); echo "-- $name:"; echo "$r"
}
variant asis '' '' &
variant O0 's/ -O3 / -O0 /' '' &
variant O2 's/ -O3 / -O2 /' '' &
variant gnu_unique 's/ -fno-gnu-unique//' '' &
wait
variant no_limited_api 's/ -DPy_LIMITED_API=[^ ]*//' '' &
variant no_prefix_map 's/ -ffile-prefix-map=[^ ]*//g' '' &
variant no_build_id '' 's/ -Wl,--build-id=sha1//' &
variant plain 's/ -O3 / -O2 /; s/ -fno-gnu-unique//; s/ -DPy_LIMITED_API=[^ ]*//; s/ -ffile-prefix-map=[^ ]*//g' 's/ -Wl,--build-id=sha1//' &
wait
echo "== done"
