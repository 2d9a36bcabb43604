#!/usr/bin/env bash
# carry: nothing
# Waits up to $1 seconds (default 560) for a detached run (bench/gpu/corpus_x2.sh, corpus_flash_attn2.sh, dist_compile.sh, peers.sh, ready_split.sh,
# scale_and_nvcc_parallel.sh, trl_attention.sh, layer_training.sh, build_for_my_gpu*.sh), prints each lane's progress (each folder of /tmp/run is a
# lane), and packs /tmp/run into $OUT/run.tgz (the device tool brings back 8 files), with the lanes' result JSON beside it. It reads only
# /tmp/run, which the run keeps outside the checkout: a later call's re-synced tree leaves it alone.
source bench/gpu/harness.sh || exit 1
limit=${1:-560}; run=/tmp/run; t0=$(date +%s)
while [ ! -f $run/done ] && [ $(( $(date +%s) - t0 )) -lt $limit ]; do sleep 10; done
echo "== $(( $(date +%s) - $(cat $run/start) )) s since start; done: $(ls $run/*/done $run/done 2>/dev/null | tr '\n' ' ')"
cat $run/glibc $run/machine 2>/dev/null
for lane in $(cd $run && ls -d */ 2>/dev/null | tr -d /); do
  echo "== lane $lane"; tail -n 6 $run/$lane/log $run/$lane/corpus.log 2>/dev/null | cut -c1-300
  cat $run/$lane/corpus.jsonl 2>/dev/null
done
# the detached run's own output: where a run that stopped before its first lane says why
[ -f $run/done ] || { echo "== /tmp/run.log"; tail -n 5 /tmp/run.log 2>/dev/null; }
bring_back_tgz run.tgz $run
bring_back $run/A/nvcc_parallel.json $run/S/scale.json $run/D/dist_compile.json $run/P/peers.json
true
