set -u
# Timing probe (results meaningless, so --no-check): the 4-bit mma kernel's MXFP4 8-token instance with a stand-in
# decode of ~3.8 instructions per bf16 pair (probe_decode.diff: two funnel shifts and LOP3 selects per word pair
# where a prepared weight layout would need them) against the real decode (~4.9): how much of the decode-size GEMM
# time a prepared layout could take back. One binary built with the diff (never committed); off / on =
# FUSEDMOE_PROBE_FAKE_DECODE unset / set; both with FUSEDMOE_W4_TAIL=0 (gpt-oss-120b on the plain instance too).
# `bash bench/results/2026-11-28-h200-w4-decode-probe/run.sh`
mkdir -p /tmp/pb && tar xf .devcarry/pack/probe_bench.tgz -C /tmp/pb
B=/tmp/pb/bench O=$OUT/probe t0=$(date +%s)
mkdir -p $O
{ nvidia-smi --query-gpu=name,driver_version --format=csv; echo "90299b9 + probe_decode.diff"; date -u; } > $O/device.txt
i=0
for pt in "qwen3-30b-a3b-tp1 8,64" "gpt-oss-120b 8,64" "deepseek-v3-tp1 8,64"; do
  i=$((i + 1)); read -r preset ms <<< "$pt"
  timeout 200 python3 bench/ab.py run --bench $B --out /tmp/pab_$i --variant off:FUSEDMOE_W4_TAIL=0 \
    --variant on:FUSEDMOE_W4_TAIL=0,FUSEDMOE_PROBE_FAKE_DECODE=1 --order off,on,on,off,off,on --base off -- \
    --preset $preset --m $ms --formats mxfp4 --no-check --no-ceilings --stage-runs 5 --max-minutes 0.3 > /tmp/pab_$i.log 2>&1
  echo "ab $i ($pt) rc=$? $(($(date +%s) - t0))s"
  sed -n '/| preset/,$p' /tmp/pab_$i.log | tee $O/ab_$i.md
  python3 bench/ab.py stages $(ls -d /tmp/pab_$i/*_*/) > $O/stages_$i.txt 2>&1
done
