#!/usr/bin/env bash
# Third pass (issue 2): what the H200's $CXX is, and the fix (libstdc++ linked shared ahead of
# the driver's libraries) run through kbuild itself: rmsnorm's whole test file on the GPU, and the
# stable-ABI activation .so built on the x86 dev machine (issue 5) under the H200's torch 2.11.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
exec > >(tee "$OUT/gpu_run3.log") 2>&1
python -c "import rich, ninja" 2>/dev/null || python -m pip install -q --no-index --find-links .device/wheels rich ninja
export PYTHONPATH=$PWD CI=1
echo "== compiler"; env | grep -E "^(CXX|CC|CUDAHOSTCXX|LDFLAGS|CXXFLAGS)=" ; ls -la /opt/gcc/bin | head -8
file -L /opt/gcc/bin/g++ | cut -c1-200; [ "$(stat -L -c %s /opt/gcc/bin/g++)" -lt 4096 ] && cat /opt/gcc/bin/g++
echo 'int main(){}' > /tmp/t.cpp; /opt/gcc/bin/g++ -v -shared -fPIC /tmp/t.cpp -o /tmp/t.so 2>&1 | grep -o -E "(-static-libstdc\+\+|-Bstatic -lstdc\+\+|libstdc\+\+\.a|-lstdc\+\+)" | sort | uniq -c
V=torch211-cxx11-cu130-x86_64-linux
time python -m builder.commands.main build kernels/rmsnorm -j 16 --variant $V 2>&1 | tail -3
so=$(ls kernels/rmsnorm/build/$V/*.so); echo "NEEDED:"; readelf -d $so | grep NEEDED
echo "libstdc++ symbols defined inside: $(nm -D --defined-only $so | grep -c -E ' _ZNS[oit]|codecvt')"
echo "== rmsnorm tests (GPU)"; python -m builder.commands.main test kernels/rmsnorm --variant $V 2>&1 | tail -4; grep -E "passed|failed" kernels/rmsnorm/.kbuild/$V/test.log | tail -2
tail -3 kernels/rmsnorm/.kbuild/$V/test.log 2>/dev/null
exit 0
echo "== activation stable ABI built on x86 dev box, torch $(python -c 'import torch;print(torch.__version__)')"
python -m builder.commands.main test kernels/activation --variant torch-stable-abi210-cu130-x86_64-linux 2>&1 | tail -4; grep -E "passed|failed" kernels/rmsnorm/.kbuild/$V/test.log | tail -2
for f in kernels/activation/.kbuild/*/test.log; do echo "== $f"; tail -3 "$f"; done
echo "== done"
