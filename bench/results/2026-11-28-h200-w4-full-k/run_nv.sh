set -u
# r4: NVFP4's lean 8-token tile with kFullK at k >= 4096 (nvfk.diff on 739f3ba, uncommitted), two builds: bench with
# __launch_bounds__(128, 6) on that instance (80 registers, 16-byte spill), bench_nv5 with (128, 5) (88 registers, no
# spill, 5 blocks per SM). off = FUSEDMOE_W4_FULLK=0 (the predicated instance, the same code in both builds).
# `bash bench/results/2026-11-28-h200-w4-full-k/run_nv.sh` on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
B=$PWD/.devcarry/bin O=$OUT/r4 t0=$(date +%s)
mkdir -p $O
{ nvidia-smi --query-gpu=name,driver_version --format=csv; cat $B/sha; date -u; } > $O/device.txt
timeout 200 $B/tests --gtest_filter='Formats/W4Gpu.*:W4GpuEdge.*:AllFormatsActivations/LayerGpu.MatchesOracle/*fp4*:Formats/LongKGpu.*' > /tmp/t.log 2>&1
echo "tests (bench_nv5's build) rc=$? $(($(date +%s) - t0))s"; grep -E "^\[  FAILED|PASSED  \]|FAILED  \]" /tmp/t.log | tail -4 | tee $O/tests_summary.txt
timeout 240 python3 bench/ab.py run --bench $B/bench --variant-bench fk5=$B/bench_nv5 --out /tmp/r4 --variant off:FUSEDMOE_W4_FULLK=0 \
  --variant fk6: --variant fk5: --order off,fk6,fk5,fk5,fk6,off,off,fk6,fk5 --base off -- --preset deepseek-v3-tp1 --m 8,64 \
  --formats nvfp4,nvfp4-w4a4 --check-tokens 2 --no-ceilings --stage-runs 3 --max-minutes 0.3 > /tmp/r4.log 2>&1
echo "ab rc=$? $(($(date +%s) - t0))s"; sed -n '/| preset/,$p' /tmp/r4.log | tee $O/ab.md
python3 bench/ab.py stages $(ls -d /tmp/r4/*_*/) > $O/stages.txt 2>&1
find /tmp/r4 -name "*.npy" -delete; find /tmp/r4 -type d -name routing -print0 | xargs -0 -r rm -rf
tar czf $O/raw.tgz -C /tmp r4; cd $OUT && tar czf r4.tgz r4 && rm -rf r4
