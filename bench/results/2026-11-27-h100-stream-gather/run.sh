set -u
# The stream GEMM's GEMM1 + activation gathering its rows by token (stream_gemm.cu, StreamGather) on an H100: the
# gather tests, the GPU suite (SUITE=0 skips it), then a same-binary A/B of the permuted operand
# (FUSEDMOE_GEMM1_GATHER=0) against the gather forced on (=1) wherever it can run (the few-rows range points:
# 256 / 1024 tokens; 4096 tokens run CUTLASS, where =1 forces the CUTLASS gather too).
# `bash bench/results/2026-11-27-h100-stream-gather/run.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/sg; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 90 $B/fusedmoe_gpu_tests --gtest_filter='Gemm1GatherGpu.*:StreamGemm*:DequantD.*' > $R/new_tests.log 2>&1; echo "new tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|PASSED|FAILED  \]|SKIPPED \]" $R/new_tests.log | tail -12
if [ "${SUITE:-1}" = 1 ]; then timeout 240 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
  grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt; gzip -9 $R/gpu_tests.log; fi
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
timeout 200 $AB --out $R/ab --variant permuted:FUSEDMOE_GEMM1_GATHER=0 --variant gathered:FUSEDMOE_GEMM1_GATHER=1 --order permuted,gathered,permuted,gathered --base permuted -- \
  --preset mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 --m 256,1024 --formats bf16,fp8-tensor,fp8-channel --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 0.7 > $R/ab.log 2>&1
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
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
