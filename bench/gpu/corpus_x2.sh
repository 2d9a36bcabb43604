#!/usr/bin/env bash
# Issue 9's remaining H200 work as one detached run on an nvidia-h200-x2 machine (2 GPUs, 32
# cores), started with `setsid` so it outlives one 10-minute device call; bench/gpu/collect.sh
# waits for it and brings the logs back. Three lanes side by side:
#   A  taskset -c 0-11, nice 0: bench/nvcc_parallel.py on causal-conv1d's and paged-attention's
#      heaviest .cu (full default arch list, kbuild vs torch.utils.cpp_extension.load). The
#      other lanes run at nice 19, so these 12 cores stay A's: its figures are not contended.
#   B  GPU 1 (and 0), nice 19: corpus.sh 9.0a megablocks paged-attention (full test suites)
#   C  GPU 0, nice 19: corpus.sh 9.0a flash-attn2 (its -k subset), then corpus.sh 10.0a nvfp4-gemm
# Output: /tmp/run/{A,B,C}/..., /tmp/run/done when all lanes have finished.
#   setsid bash bench/gpu/corpus_x2.sh >/tmp/run.log 2>&1 < /dev/null &
set -uo pipefail
run=/tmp/run; rm -rf $run; mkdir -p $run/A $run/B $run/C
here=$PWD
python -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
  .device/wheels/{rich,markdown_it,mdurl,pygments,pyelftools,kernels,einops}*.whl || exit 1
export PYTHONPATH=$here:/tmp/site CI=1 PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
date +%s > $run/start

mkdir -p /tmp/bc
for k in causal-conv1d paged-attention; do
  cp -r .device/corpus/$k /tmp/bc/$k
  (cd /tmp/bc/$k && git init -q && git add -A && git -c user.email=kbuild@localhost -c user.name=kbuild commit -qm $k)
done
( taskset -c 0-11 python bench/nvcc_parallel.py \
    /tmp/bc/causal-conv1d:causal-conv1d/causal_conv1d_bwd.cu \
    /tmp/bc/paged-attention:paged-attention/attention/paged_attention_v2.cu \
    --out $run/A/nvcc_parallel.json > $run/A/log 2>&1; echo "exit $?" >> $run/A/log; touch $run/A/done ) &

( export OUT=$run/B WORK=/tmp/wsB CUDA_VISIBLE_DEVICES=1,0 TEST_TIMEOUT=1500
  nice -n 19 bash bench/gpu/corpus.sh 9.0a megablocks paged-attention > /dev/null 2>&1; touch $run/B/done ) &

( export OUT=$run/C CUDA_VISIBLE_DEVICES=0 TEST_TIMEOUT=1500
  export PYTEST_ARGS_flash_attn2='-k "qkvpacked and -128- or test_flash_attn_causal or overflow or transpose or test_mha_varlen_fwd or test_flash_attn_raw"'
  WORK=/tmp/wsC nice -n 19 bash bench/gpu/corpus.sh 9.0a flash-attn2 > /dev/null 2>&1
  WORK=/tmp/wsD nice -n 19 bash bench/gpu/corpus.sh 10.0a nvfp4-gemm > /dev/null 2>&1; touch $run/C/done ) &
wait
touch $run/done
