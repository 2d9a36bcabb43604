#!/usr/bin/env bash
# Second pass on the rmsnorm H200 crash (issue 2): smallest reproducer (with and without
# autograd, straight through torch.ops), a cuda-gdb backtrace, the CPU variant on the same
# machine, and the kbuild flags the first pass did not reach. Output: $OUT/rmsnorm_crash2.log.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/rmsnorm_crash2.log") 2>&1
python -c "import rich, ninja" 2>/dev/null || python -m pip install -q --no-index --find-links .device/wheels rich ninja
export PYTHONPATH=$PWD CI=1
K=$PWD/kernels/rmsnorm; V=torch211-cxx11-cu130-x86_64-linux; C=torch211-cxx11-cpu-x86_64-linux
python -m builder.commands.main build $K -j 16 --variant $V --variant $C 2>&1 | tail -3
cat > /tmp/repro.py <<'PY'
import sys, torch, rmsnorm
dev, mode = sys.argv[1], sys.argv[2]
x = torch.randn(4, 8, device=dev, requires_grad=(mode == "grad"))
w = torch.ones(7, device=dev)
try:
    if mode == "ops":
        rmsnorm.ops.rms_norm(x, w, 1e-6)
    elif mode == "nograd":
        with torch.no_grad():
            rmsnorm.rms_norm(x, w)
    elif mode == "dtype":
        rmsnorm.ops.rms_norm(x.double(), w.double(), 1e-6)
    else:
        rmsnorm.rms_norm(x, w)
except RuntimeError as e:
    print("raised:", str(e).splitlines()[0])
print("ok", mode, flush=True)
PY
r() { local d=$1; shift; local l; l=$(mktemp -d); ln -s "$d" "$l/rmsnorm"; PYTHONPATH=$l:$PWD timeout 120 "$@"; }
echo "== 1. reproducer on cuda"
for mode in ops dtype nograd default grad; do
  r $K/build/$V python -X faulthandler /tmp/repro.py cuda $mode > /tmp/m.log 2>&1; echo "-- $mode rc=$?"; grep -v "^  File \"/opt\|^  File \"<frozen" /tmp/m.log | head -20
done
echo "== 2. cpu variant on cpu"
for mode in ops dtype default; do r $K/build/$C python /tmp/repro.py cpu $mode 2>&1 | tail -2; done
echo "== 3. cuda-gdb backtrace (ops mode)"
r $K/build/$V cuda-gdb -q -batch -ex "set pagination off" -ex run -ex "bt 30" -ex "info registers rip" -ex "x/6i \$pc" --args python /tmp/repro.py cuda ops 2>&1 | grep -v "^\[New Thread\|^\[Thread\|Detaching" | tail -50
echo "== 4. flags"
cd $K/.kbuild
obj=$(ninja -f build.ninja -t targets all | grep "$V/obj/torch-ext/torch_binding.cpp.o:" | cut -d: -f1)
so=$(ls $PWD/$V/*.so)
ccmd=$(ninja -f build.ninja -t commands "$obj" | grep -F "torch_binding.cpp" | tail -1)
lcmd=$(ninja -f build.ninja -t commands "$so" | tail -1)
variant() {
  local name=$1 cs=$2 ls=$3 d=$K/bisect-$1
  rm -rf "$d"; cp -r "$K/build/$V" "$d"
  local c=$(echo "$ccmd" | sed -e "$cs" -e "s# -o [^ ]*\$# -o $d/b.o#" -e 's#^[^ ]*/bin/compile ##')
  local l=$(echo "$lcmd" | sed -e "$ls" -e "s#[^ ]*torch_binding.cpp.o#$d/b.o#" -e "s# -o [^ ]*\.so# -o $d/$(basename $so .so).abi3.so#")
  (eval "$c" && eval "$l") >"$d.build.log" 2>&1 || { echo "$name: BUILD FAILED"; tail -5 "$d.build.log"; return; }
  local out; out=$(r "$d" python /tmp/repro.py cuda ops 2>&1 | tail -2); echo "-- $name rc=$? :: $out"
}
variant no_limited_api 's/ -DPy_LIMITED_API=[^ ]*//' '' &
variant no_prefix_map 's/ -ffile-prefix-map=[^ ]*//g' '' &
variant no_build_id '' 's/ -Wl,--build-id=sha1//' &
variant cxx20 's/ -std=c++17 / -std=c++20 /' '' &
variant sys_gxx 's#^/opt/gcc/bin/g++#/usr/bin/g++#' 's#^/opt/gcc/bin/g++#/usr/bin/g++#' &
variant no_nvidia_inc 's# -I[^ ]*/nvidia/cu13/include##' '' &
wait
echo "== done"
