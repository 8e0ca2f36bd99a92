set -u
# Experiment: the 4-bit mma kernel's plain 8-token instances with 3 weight stages per warp (two in flight while one
# is decoded) instead of 2 (stages3.diff, not committed; env FUSEDMOE_W4_STAGES=3): 2026-11-22 measured 2 stages
# 3% faster at that kernel's code; after 2026-11-28's decode probe (latency-bound, one stage in flight) tried again.
# One binary (bac7dfe plus the diff); off / st3 interleaved; oracle check on.
# `bash bench/results/2026-11-28-h200-w4-three-stages/run.sh`
mkdir -p /tmp/pb && tar xf .devcarry/pack/probe_bench.tgz -C /tmp/pb
B=/tmp/pb/bench O=$OUT/st t0=$(date +%s)
mkdir -p $O
{ nvidia-smi --query-gpu=name,driver_version --format=csv; echo "bac7dfe + stages3.diff"; date -u; } > $O/device.txt
i=0
for pt in "qwen3-30b-a3b-tp1 8,64 mxfp4,nvfp4,w4a8-int4" "gpt-oss-120b 8,64 nvfp4" "deepseek-v3-tp1 8 mxfp4,nvfp4"; do
  i=$((i + 1)); read -r preset ms fmts <<< "$pt"
  timeout 200 python3 bench/ab.py run --bench $B --out /tmp/stab_$i --variant off:FUSEDMOE_W4_STAGES=2 \
    --variant st3:FUSEDMOE_W4_STAGES=3 --order off,st3,st3,off,off,st3 --base off -- \
    --preset $preset --m $ms --formats $fmts --check-tokens 2 --no-ceilings --stage-runs 3 --max-minutes 0.3 > /tmp/stab_$i.log 2>&1
  echo "ab $i ($pt) rc=$? $(($(date +%s) - t0))s"
  sed -n '/| preset/,$p' /tmp/stab_$i.log | tee $O/ab_$i.md
  python3 bench/ab.py stages $(ls -d /tmp/stab_$i/*_*/) > $O/stages_$i.txt 2>&1
done
