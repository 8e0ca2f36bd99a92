set -u
# The 4-bit wgmma kernel's 288-token-tile instance (kPairWide) at 8192 tokens, where gpt-oss-120b and DeepSeek-V3 TP1 have
# 256 rows per expert, on the formats r2 left out or left noisy (gpt-oss nvfp4: layer medians spread over 7%). One
# binary: on = default, off = FUSEDMOE_W4_PAIR_WIDE=0 (kPairFull). The A/B only.
# r4: `bash bench/results/2026-11-28-h100-w4-pair-wide/run8k-b.sh` (binaries of 7f1af9c: WIDE at 249..288 rows only; more runs at 256 rows per expert)
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=/tmp/pw8b; O=$OUT/pw8b; mkdir -p $R $O
nvidia-smi --query-gpu=name,driver_version --format=csv > $O/device.txt; cat $B/sha >> $O/device.txt; date -u >> $O/device.txt
AB="python3 bench/ab.py run --bench $B/bench"
ab() {  # name presets m formats
  timeout ${ABT:-240} $AB --out $R/ab_$1 --variant off:FUSEDMOE_W4_PAIR_WIDE=0 --variant on: --order ${ORDER:-off,on,on,off,off,on,on,off,off,on} --base off -- \
    --preset $2 --m $3 --formats $4 --check-tokens 2 --no-ceilings --stage-runs 3 --max-minutes 0.3 > $R/ab_$1.log 2>&1
  echo "ab $1 rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_$1.log | tee $O/ab_$1.md
  python3 bench/ab.py stages $(ls -d $R/ab_$1/*_*/) > $O/stages_$1.txt 2>&1
}
ab gptoss gpt-oss-120b 8192 nvfp4,mxfp4-fp8
ORDER=off,on,on,off,off,on ABT=240 ab ds deepseek-v3-tp1 8192 nvfp4,mxfp4-fp8
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
tar czf $OUT/pw8b.tgz -C $R . ; echo "done $(( $(date +%s)-t0 ))s"
