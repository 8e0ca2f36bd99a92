set -u
# Experiment: the 4-bit mma kernel's 8-token instances asking their weight rows of stage c + kPf into L2
# (cp.async.bulk.prefetch.L2, 4 rows per column-0 lane) when stage c is issued, kPf = 2 / 4 (pf.diff, not committed):
# more weight bytes on their way per warp without more shared memory. One binary (edf277f plus pf.diff); variants
# off (FUSEDMOE_W4_PF unset), pf2, pf4, interleaved; the check against the oracle on (results unchanged).
# `bash bench/results/2026-11-28-h200-w4-l2-prefetch/run.sh`
mkdir -p /tmp/pb && tar xf .devcarry/pack/probe_bench.tgz -C /tmp/pb
B=/tmp/pb/bench O=$OUT/pf t0=$(date +%s)
mkdir -p $O
{ nvidia-smi --query-gpu=name,driver_version --format=csv; echo "edf277f + pf.diff"; date -u; } > $O/device.txt
i=0
for pt in "qwen3-30b-a3b-tp1 8,64 mxfp4,nvfp4" "gpt-oss-120b 8,64 mxfp4,nvfp4" "deepseek-v3-tp1 8 mxfp4,nvfp4,w4a8-int4"; do
  i=$((i + 1)); read -r preset ms fmts <<< "$pt"
  timeout 200 python3 bench/ab.py run --bench $B --out /tmp/pfab_$i --variant off:FUSEDMOE_W4_PF=0 \
    --variant pf2:FUSEDMOE_W4_PF=2 --variant pf4:FUSEDMOE_W4_PF=4 --order off,pf2,pf4,pf4,pf2,off,off,pf4,pf2 --base off -- \
    --preset $preset --m $ms --formats $fmts --check-tokens 2 --no-ceilings --stage-runs 3 --max-minutes 0.3 > /tmp/pfab_$i.log 2>&1
  echo "ab $i ($pt) rc=$? $(($(date +%s) - t0))s"
  sed -n '/| preset/,$p' /tmp/pfab_$i.log | tee $O/ab_$i.md
  python3 bench/ab.py stages $(ls -d /tmp/pfab_$i/*_*/) > $O/stages_$i.txt 2>&1
done
