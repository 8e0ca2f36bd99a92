set -u
# Experiment (lean.diff, not committed): MXFP4's mma kernel with the mask-multiply decode (decode_word<F, true>: the
# same bits, fewer ALU-pipe instructions) on a GEMM operand stored pre-paired (KOrder::W4_MMA: no PRMT per word) -
# the k loop's ALU-pipe instructions 440 -> 361 (8-token tile, held at 80 registers), 437 -> 341 (tail instance),
# 519 -> 359 (16-token tile). Switch FUSEDMOE_W4_LEAN=1. Tests with the switch on, then same-binary A/Bs.
# `bash bench/results/2026-11-28-h200-w4-lean-decode/run.sh`
mkdir -p /tmp/lb && tar xf .devcarry/pack/lean.tgz -C /tmp/lb
B=/tmp/lb O=$OUT/lean t0=$(date +%s)
mkdir -p $O
{ nvidia-smi --query-gpu=name,driver_version --format=csv; echo "f55850d + lean.diff"; date -u; } > $O/device.txt
FUSEDMOE_W4_LEAN=1 timeout 200 $B/tests --gtest_filter='Formats/W4Gpu.*:W4GpuEdge.*:AllFormatsActivations/LayerGpu.MatchesOracle/mxfp4*:Shapes/DecodeLayerW4Gpu.*' > /tmp/lt.log 2>&1
echo "tests (lean on) rc=$? $(($(date +%s) - t0))s"
grep -E "^\[  FAILED|PASSED  \]|FAILED  \]|SKIPPED \]" /tmp/lt.log | tail -6 | tee $O/tests_summary.txt
i=0
for pt in "qwen3-30b-a3b-tp1 8,64,160 mxfp4,mxfp4-fp8" "gpt-oss-120b 8,64 mxfp4,mxfp4-fp8" "deepseek-v3-tp1 8,64 mxfp4"; do
  i=$((i + 1)); read -r preset ms fmts <<< "$pt"
  timeout 200 python3 bench/ab.py run --bench $B/bench --out /tmp/lab_$i --variant off:FUSEDMOE_W4_LEAN=0 \
    --variant lean:FUSEDMOE_W4_LEAN=1 --order off,lean,lean,off,off,lean --base off -- \
    --preset $preset --m $ms --formats $fmts --check-tokens 2 --no-ceilings --stage-runs 3 --max-minutes 0.3 > /tmp/lab_$i.log 2>&1
  echo "ab $i ($pt) rc=$? $(($(date +%s) - t0))s"
  sed -n '/| preset/,$p' /tmp/lab_$i.log | tee $O/ab_$i.md
  python3 bench/ab.py stages $(ls -d /tmp/lab_$i/*_*/) > $O/stages_$i.txt 2>&1
done
