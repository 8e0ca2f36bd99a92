set -u
# r2: probe 2 (probe2_decode.diff): one LOP3 and one IMAD per bf16 pair - the k loop's ALU-pipe instructions
# 440 -> 248 (probe 1 had raised them, 440 -> 472, while cutting the FMA pipe's 309 -> 151). Timing only, --no-check.
# `bash bench/results/2026-11-28-h200-w4-decode-probe/run2.sh`
mkdir -p /tmp/pb && tar xf .devcarry/pack/probe_bench.tgz -C /tmp/pb
B=/tmp/pb/bench O=$OUT/probe2 t0=$(date +%s)
mkdir -p $O
{ nvidia-smi --query-gpu=name,driver_version --format=csv; echo "14e0f30 + probe2_decode.diff"; date -u; } > $O/device.txt
i=0
for pt in "qwen3-30b-a3b-tp1 8,64" "gpt-oss-120b 8,64" "deepseek-v3-tp1 8,64"; do
  i=$((i + 1)); read -r preset ms <<< "$pt"
  timeout 200 python3 bench/ab.py run --bench $B --out /tmp/p2ab_$i --variant off:FUSEDMOE_W4_TAIL=0 \
    --variant on:FUSEDMOE_W4_TAIL=0,FUSEDMOE_PROBE_FAKE_DECODE=1 --order off,on,on,off,off,on --base off -- \
    --preset $preset --m $ms --formats mxfp4 --no-check --no-ceilings --stage-runs 5 --max-minutes 0.3 > /tmp/p2ab_$i.log 2>&1
  echo "ab $i ($pt) rc=$? $(($(date +%s) - t0))s"
  sed -n '/| preset/,$p' /tmp/p2ab_$i.log | tee $O/ab_$i.md
  python3 bench/ab.py stages $(ls -d /tmp/p2ab_$i/*_*/) > $O/stages_$i.txt 2>&1
done
