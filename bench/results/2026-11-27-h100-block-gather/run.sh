set -u
# fp8-block GEMM1 + activation gathering its rows by token (one row of 1 x 128 codes per token) on an H100 (rejected: README.md), and the
# grid of this session's final binaries: the gather / quantiser / dequant tests, the GPU suite (SUITE=0 skips it),
# a same-binary A/B of the gather against the permuted operand (FUSEDMOE_GEMM1_GATHER=0), then the bf16 / fp8 grid
# with the PyTorch peers (GRID=0 skips it).
# `bash bench/results/2026-11-27-h100-block-gather/run.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/gather; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 90 $B/fusedmoe_gpu_tests --gtest_filter='Gemm1GatherGpu.*:QuantiseRowsGpu.*:DequantD.*:*BlockAct*:*fp8_block*' > $R/new_tests.log 2>&1; echo "new tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|PASSED|FAILED  \]|SKIPPED \]" $R/new_tests.log | tail -12
if [ "${SUITE:-1}" = 1 ]; then timeout 240 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"; fi
[ -f $R/gpu_tests.log ] && grep -E "^\[  FAILED" $R/gpu_tests.log | head; [ -f $R/gpu_tests.log ] && grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
[ -f $R/gpu_tests.log ] && gzip -9 $R/gpu_tests.log
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
timeout 120 $AB --out $R/ab --variant permuted:FUSEDMOE_GEMM1_GATHER=0 --variant gathered: --order permuted,gathered,permuted,gathered --base permuted -- \
  --preset deepseek-v3-tp8 --m 2048,4096 --formats fp8-block --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 0.5 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
python3 - $R/ab > $R/ab_stages.txt <<'PY'
import json, os, sys
d = sys.argv[1]
for run in sorted(os.listdir(d)):
    f = os.path.join(d, run, "fusedmoe-bench.json")
    if not os.path.exists(f): continue
    for p in json.load(open(f))["points"]:
        s = p.get("stages") or {}
        print(run, p["preset"], p["format"], p["M"], "total %.1f" % (1e3 * (p.get("median_ms") or 0)),
              " ".join("%s %.1f" % (k[:-3], 1e3 * s[k]) for k in ("permute_ms", "gemm1_ms", "activation_ms", "gemm2_ms", "finalize_ms") if k in s))
PY
cat $R/ab_stages.txt
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
if [ "${GRID:-1}" = 1 ]; then
R3=$OUT/grid; mkdir -p $R3; cp $R/device.txt $R3/
env FMB_PRESETS=mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 FMB_M=1,8,64,256,1024,4096 FMB_FORMATS=bf16,fp8-tensor,fp8-channel,fp8-block \
  FMB_BENCH_MINUTES=3 FUSEDMOE_COMMIT=$(cat $B/sha) FUSEDMOE_BENCH=$B/fusedmoe-bench FMB_WORK=/tmp/gw3 OUT=$R3 FMB_PEERS_MINUTES=1.5 \
  FMB_REPEAT_PRESETS=qwen3-30b-a3b-tp1 FMB_REPEAT_M=1 FMB_REPEAT_FORMATS=fp8-tensor \
  timeout 290 bash bench/run_gpu_bench.sh bench repeat peers report > $R3/grid.log 2>&1; echo "grid rc=$? $(( $(date +%s)-t0 ))s"
grep -E "ok,|SKIP" $R3/grid.log | tail -2; rm -f $R3/results.tar.gz
find $OUT -name "*.npy" -delete; find $OUT -type d -name routing | xargs -r rm -rf
fi
