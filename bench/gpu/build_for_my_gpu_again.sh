#!/usr/bin/env bash
# Issue 36, second H200 run (after build_for_my_gpu.sh): flash-mla again with kbuild test's plugin taking its
# unversioned get_kernel call and its script routines as skips that say why; punica-sgmv with the
# CUTLASS 3.8 wheel run12 lacked; and what the pre-staging checks cost on each library
# (bench/gpu/check_cost.py). Detached like build_for_my_gpu.sh; bench/gpu/collect.sh brings /tmp/run back.
set -uo pipefail
run=/tmp/run; rm -rf $run /tmp/site /tmp/snap; mkdir -p $run/M $run/P
cp -r . /tmp/snap && cd /tmp/snap || exit 1
python -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
  .device/wheels/{pyelftools,auditwheel,abi3info,kernels,tomlkit}*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site CI=1 PYTHONUNBUFFERED=1 TEST_TIMEOUT=600
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
date +%s > $run/start
echo "$(nvidia-smi -L | wc -l) GPU(s), $(nproc) vCPUs, $(python -c 'import torch; print(torch.__version__)')" > $run/machine
lane() { local name=$1; shift; local t0=$(date +%s)
  OUT=$run/$name WORK=/tmp/ws-$name bash bench/gpu/corpus.sh "$@" > /dev/null 2>&1
  echo "$(( $(date +%s) - t0 ))" > $run/$name/seconds
  for so in /tmp/ws-$name/*/.kbuild/*/_*.so; do python bench/gpu/check_cost.py $so >> $run/$name/check_cost.jsonl 2>&1; done
  touch $run/$name/done; }
lane M 9.0a flash-mla
lane P 9.0a punica-sgmv
touch $run/done
