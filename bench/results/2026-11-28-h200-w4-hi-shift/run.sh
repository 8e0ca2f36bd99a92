set -u
# Experiment (hishift.diff on 4ad4b0e, uncommitted): the e2m1 mask-multiply decode's `w >> 8` (one SHF per packed word,
# ALU pipe) as mul.hi.u32 by 2^24 (IMAD.HI, FMA pipe). Two builds: bench (W4_HI_SHIFT 1) and bench_hs0 (0, the shift).
# Tests of the hi-shift build (E2m1Device.DecodeWordFormsAgreeOnEveryWord: all 2^32 words), then the A/B.
# `bash bench/results/2026-11-28-h200-w4-hi-shift/run.sh` on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin O=$OUT/hs t0=$(date +%s)
mkdir -p $O
{ nvidia-smi --query-gpu=name,driver_version --format=csv; cat $B/sha; date -u; } > $O/device.txt
timeout 200 $B/tests --gtest_filter='E2m1Device.*:Formats/W4Gpu.*:W4GpuEdge.*:AllFormatsActivations/LayerGpu.MatchesOracle/*fp4*:Shapes/DecodeLayerW4Gpu.*:Formats/LongKGpu.*' > /tmp/t.log 2>&1
echo "tests rc=$? $(($(date +%s) - t0))s"; grep -E "^\[  FAILED|PASSED  \]|FAILED  \]" /tmp/t.log | tail -4 | tee $O/tests_summary.txt
i=0
for pt in "deepseek-v3-tp1 8,64 mxfp4,nvfp4" "gpt-oss-120b 1,8,64 mxfp4,nvfp4" "qwen3-30b-a3b-tp1 1,8,64 mxfp4,nvfp4"; do
  i=$((i + 1)); read -r preset ms fmts <<< "$pt"
  timeout 150 python3 bench/ab.py run --bench $B/bench --variant-bench off=$B/bench_hs0 --out /tmp/hs_$i --variant off: \
    --variant hs: --order off,hs,hs,off,off,hs --base off -- --preset $preset --m $ms --formats $fmts --check-tokens 2 \
    --no-ceilings --stage-runs 3 --max-minutes 0.3 > /tmp/hs_$i.log 2>&1
  echo "ab $i ($pt) rc=$? $(($(date +%s) - t0))s"; sed -n '/| preset/,$p' /tmp/hs_$i.log | tee $O/ab_$i.md
  python3 bench/ab.py stages $(ls -d /tmp/hs_$i/*_*/) > $O/stages_$i.txt 2>&1
done
find /tmp/hs_* -name "*.npy" -delete; find /tmp/hs_* -type d -name routing -print0 | xargs -0 -r rm -rf
tar czf $O/raw.tgz /tmp/hs_* 2>/dev/null; cd $OUT && tar czf hs.tgz hs && rm -rf hs
