#!/usr/bin/env bash
# carry: nothing (it runs inside trl_attention.sh's copy, as that script's last lane)
# trl_attention.sh's lane T, with that script's exported environment ($run, $HUB, HF_ENDPOINT, the publish
# function): flash-attn2's build published to the hub as kernels-community/flash-attn2@v3, then
# bench/gpu/trl_attention.py: time to ready for each loader of $READY_LOADERS (default `hf kbuild`; `transformers`
# is from_pretrained with attn_implementation), cold then warm, each loader with its own HF_HOME, before the
# training steps (which fill $HF_HOME): only the first ready row finds every cache empty, a front's too.
# trl_attention_front.sh runs it too, with $HUB the upstream it publishes to and HF_ENDPOINT its front.
set -uo pipefail
source bench/gpu/harness.sh || exit 1
carried && snapshot || exit 1
declare -F publish > /dev/null || { echo "trl_attention_lane.sh: no publish function: it runs as trl_attention.sh's lane" >&2; exit 1; }
t0=$(date +%s)
publish /tmp/fa/flash-attn2 --allow-partial-archs --json > $run/T/publish.json 2> $run/T/publish.err
echo "publish exit $? in $(( $(date +%s) - t0 )) s" > $run/T/log
loaders=${READY_LOADERS:-hf kbuild}
case " $loaders " in *" transformers "*)
  python bench/gpu/trl_attention.py --make-model /tmp/trl-model --out $run/T/model.json >> $run/T/log 2>&1 ;;
esac
for loader in $loaders; do for mode in cold warm; do
  HF_HOME=/tmp/hfhome-$loader python bench/gpu/trl_attention.py --ready $mode --loader $loader --model /tmp/trl-model \
    --out $run/T/ready_${loader}_$mode.json >> $run/T/log 2>&1
done; done
python bench/gpu/trl_attention.py --seq 4096 --layers 4 --steps 3 --out $run/T/train.json >> $run/T/log 2>&1
echo "train exit $?" >> $run/T/log
touch $run/T/done
