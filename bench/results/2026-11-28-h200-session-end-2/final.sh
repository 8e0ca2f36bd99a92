set -u
# The state at the end of the 2026-11-28 session (lean decode of MXFP4 / NVFP4, kFullK; binaries of
# .devcarry/sha8) on an H200: the whole GPU test suite, a memcheck of the decode-size 4-bit tests, the 4-bit tests with
# FUSEDMOE_W4_LEAN=0 (the old decode, kept as a switch), then the 4-bit grid with its peers.
# `bash bench/results/2026-11-28-h200-session-end-2/final.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; S=$(cat .devcarry/sha8)
O=$OUT/final; R6=$OUT/final/grid6; mkdir -p $O/suite $R6
for D in $O/suite $R6; do nvidia-smi --query-gpu=name,driver_version --format=csv > $D/device.txt; echo "commit $S (binaries built from it)" >> $D/device.txt; date -u >> $D/device.txt; done
timeout 420 $B/tests > $O/suite/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|PASSED  \]|FAILED  \]|SKIPPED \]" $O/suite/gpu_tests.log | tail -6 | tee $O/suite/summary.txt
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 $B/tests --gtest_filter='Formats/W4Gpu.DecodeSizesMatchOracle/*' > $O/suite/memcheck.log 2>&1; echo "memcheck rc=$? $(( $(date +%s)-t0 ))s"
grep -E "PASSED|FAILED|ERROR SUMMARY" $O/suite/memcheck.log | tail -3 | tee -a $O/suite/summary.txt
FUSEDMOE_W4_LEAN=0 timeout 120 $B/tests --gtest_filter='Formats/W4Gpu.*:W4GpuEdge.*:AllFormatsActivations/LayerGpu.MatchesOracle/*fp4*:Shapes/DecodeLayerW4Gpu.*' > $O/suite/lean_off.log 2>&1; echo "lean-off tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|PASSED  \]|FAILED  \]|SKIPPED \]" $O/suite/lean_off.log | tail -3 | sed 's/^/FUSEDMOE_W4_LEAN=0: /' | tee -a $O/suite/summary.txt
gzip -9 $O/suite/gpu_tests.log $O/suite/memcheck.log $O/suite/lean_off.log
env FMB_PRESETS=gpt-oss-120b,deepseek-v3-tp1,qwen3-30b-a3b-tp1 FMB_M=1,8,64,256,1024,4096 FMB_FORMATS=w4a8-int4,mxfp4,mxfp4-fp8,nvfp4,nvfp4-w4a4 \
  FMB_BENCH_MINUTES=3 FUSEDMOE_COMMIT=$S FUSEDMOE_BENCH=$B/bench FMB_WORK=/tmp/gw6 OUT=$R6 FMB_PEERS_MINUTES=1.2 \
  FMB_REPEAT_PRESETS=qwen3-30b-a3b-tp1 FMB_REPEAT_M=8 FMB_REPEAT_FORMATS=mxfp4 \
  timeout 230 bash bench/run_gpu_bench.sh bench repeat peers report > $R6/grid.log 2>&1; echo "grid6 rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ok,|SKIP" $R6/grid.log | tail -2; rm -f $R6/results.tar.gz
find $R6 -name "*.npy" -delete; find $R6 -type d -name routing | xargs -r rm -rf
cd $OUT && tar czf final.tgz final && rm -rf final
