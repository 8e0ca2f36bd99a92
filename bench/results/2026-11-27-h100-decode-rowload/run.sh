set -u
# The one-token layer's row-contiguous GEMM1 weight loads (decode_layer.cu: 4 rows x 128 bytes per warp load instead
# of 8 rows x 64 bytes) on an H100: the GPU suite on the new binary (SUITE=0 skips it), then a two-binary A/B,
# interleaved (old = the binaries of 27d776b in .devcarry/old, new = .devcarry/bin) at one and two tokens on the presets
# the one-kernel layer takes (Qwen3-30B-A3B, DeepSeek-V3 TP8; fp8-tensor / fp8-block / fp8-channel), plus Mixtral-8x7B at
# 768 tokens (the stream GEMM's tall tile there in old, not in new: its bound went 192 -> 144 rows per expert).
# `bash bench/results/2026-11-27-h100-decode-rowload/run.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; O=$PWD/.devcarry/old; R=$OUT/rowload; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; echo "old: $(cat $O/sha)" >> $R/device.txt; date -u >> $R/device.txt
if [ "${SUITE:-1}" = 1 ]; then timeout 200 $B/fusedmoe_gpu_tests > $R/gpu_tests.log 2>&1; echo "suite rc=$? $(( $(date +%s)-t0 ))s"
  grep -E "^\[  FAILED" $R/gpu_tests.log | head; grep -E "PASSED|FAILED  \]|SKIPPED \]" $R/gpu_tests.log | tail -4 | tee $R/gpu_tests_summary.txt
  grep -E "DecodeLayer|StreamGemmTall|TallTile|AutoTakesOnly" $R/gpu_tests.log | grep -E "OK|FAILED" > $R/touched_tests.txt; gzip -9 $R/gpu_tests.log; fi
AB="python3 bench/ab.py run --variant-bench old=$O/fusedmoe-bench --variant-bench new=$B/fusedmoe-bench --variant old: --variant new: --order old,new,old,new,old,new --base old"
timeout 150 $AB --out $R/ab_decode -- --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8 --m 1,2 --formats fp8-tensor,fp8-block,fp8-channel \
  --check-tokens 2 --no-ceilings --stage-runs 0 --max-minutes 0.2 > $R/ab_decode.log 2>&1
echo "ab decode rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_decode.log
timeout 90 $AB --out $R/ab_mixtral -- --preset mixtral-8x7b --m 768 --formats bf16,fp8-tensor \
  --check-tokens 2 --no-ceilings --stage-runs 0 --max-minutes 0.2 > $R/ab_mixtral.log 2>&1
echo "ab mixtral rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab_mixtral.log
python3 - $R > $R/ab_errors.txt <<'PY'
import json, os, sys
top = sys.argv[1]
for ab in sorted(x for x in os.listdir(top) if x.startswith("ab_") and os.path.isdir(os.path.join(top, x))):
    d = os.path.join(top, ab)
    for run in sorted(os.listdir(d)):
        f = os.path.join(d, run, "fusedmoe-bench.json")
        if not os.path.exists(f): continue
        for p in json.load(open(f))["points"]:
            print(ab, run, p["preset"], p["format"], p["M"], p.get("status"), "err %.3e" % ((p.get("check") or {}).get("rel_err") or 0),
                  "median %.2f" % (1e3 * (p.get("median_ms") or 0)))
PY
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
echo "done $(( $(date +%s)-t0 ))s"
