# Sourced by the detached device runs (corpus_x2.sh, corpus_flash_attn2.sh, scale_and_nvcc_parallel.sh) with $run and $here set: the
# carried wheels, the environment every lane shares, and the machine's facts under $run.
python -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
  .device/wheels/{rich,markdown_it,mdurl,pygments,pyelftools,kernels,einops,auditwheel,abi3info}*.whl || exit 1
export PYTHONPATH=$here:/tmp/site CI=1 PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
date +%s > $run/start
ldd --version | head -1 > $run/glibc
xdist() { python -c "import xdist" 2>/dev/null && echo "-n $1"; }  # pytest-xdist's -n N, when it is there
echo "pytest-xdist: $(xdist 1 || echo absent)" > $run/xdist
