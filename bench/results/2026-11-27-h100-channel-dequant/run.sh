set -u
# fp8-channel: GEMM2's per-channel weight scales in its epilogue (the finalize multiplies by the row's
# activation scale only and reads no channel scales) and GEMM1 + activation gathering its rows by token (one row of per-token codes per
# token). On an H100: the new tests, the GPU suite (SUITE=0 skips it), then a same-binary A/B of three
# variants - base (FUSEDMOE_GEMM2_DEQUANT=0 FUSEDMOE_GEMM1_GATHER=0: the previous path), dequant (the
# epilogue dequant only), new (both, AUTO) - interleaved twice.
# `bash bench/results/2026-11-27-h100-channel-dequant/run.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/channel; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 90 $B/fusedmoe_gpu_tests --gtest_filter='DequantD.*:Gemm1GatherGpu.*:*fp8_channel*:*Channel*' > $R/new_tests.log 2>&1; echo "new tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "^\[  FAILED|PASSED|FAILED  \]|SKIPPED \]" $R/new_tests.log | tail -12
if [ "${SUITE:-1}" = 1 ]; then timeout 240 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"; fi
[ -f $R/gpu_tests.log ] && grep -E "^\[  FAILED" $R/gpu_tests.log | head; [ -f $R/gpu_tests.log ] && grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
[ -f $R/gpu_tests.log ] && gzip -9 $R/gpu_tests.log
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
timeout 330 $AB --out $R/ab --variant base:FUSEDMOE_GEMM2_DEQUANT=0,FUSEDMOE_GEMM1_GATHER=0 --variant dequant:FUSEDMOE_GEMM1_GATHER=0 --variant new: \
  --order base,dequant,new,base,dequant,new --base base -- \
  --preset mixtral-8x7b,qwen3-30b-a3b-tp1,deepseek-v3-tp1,deepseek-v3-tp8 --m ${AB_M:-256,1024,4096} --formats fp8-channel --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 0.8 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
python3 - $R/ab > $R/ab_stages.txt <<'PY'
import json, os, sys
d = sys.argv[1]
for run in sorted(os.listdir(d)):
    f = os.path.join(d, run, "fusedmoe-bench.json")
    if not os.path.exists(f): continue
    for p in json.load(open(f))["points"]:
        s = p.get("stages") or {}
        print(run, p["preset"], p["M"], "total %.1f" % (1e3 * (p.get("median_ms") or 0)),
              " ".join("%s %.1f" % (k[:-3], 1e3 * s[k]) for k in ("permute_ms", "gemm1_ms", "activation_ms", "gemm2_ms", "finalize_ms") if k in s))
PY
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
