#!/usr/bin/env bash
# carry: nothing (it runs inside trl_attention.sh's copy, as that script's last lane)
# trl_attention.sh's lane T, with that script's exported environment ($run, $HUB, HF_ENDPOINT, the publish
# function): flash-attn2's build published to the hub as kernels-community/flash-attn2@v3, then
# bench/gpu/trl_attention.py.
set -uo pipefail
source bench/gpu/harness.sh || exit 1
carried && snapshot || exit 1
declare -F publish > /dev/null || { echo "trl_attention_lane.sh: no publish function: it runs as trl_attention.sh's lane" >&2; exit 1; }
t0=$(date +%s)
publish /tmp/fa/flash-attn2 --allow-partial-archs --json > $run/T/publish.json 2> $run/T/publish.err
echo "publish exit $? in $(( $(date +%s) - t0 )) s" > $run/T/log
python bench/gpu/trl_attention.py --seq 4096 --layers 4 --steps 3 --out $run/T/train.json >> $run/T/log 2>&1
echo "train exit $?" >> $run/T/log
for loader in hf kbuild; do for mode in cold warm; do
  python bench/gpu/trl_attention.py --ready $mode --loader $loader --out $run/T/ready_${loader}_$mode.json >> $run/T/log 2>&1
done; done
touch $run/T/done
