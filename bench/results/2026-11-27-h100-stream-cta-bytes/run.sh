set -u
# The stream GEMM's weight bytes per CTA (stream_gemm.cu kTargetCtaBytes, 192 KB: how many 128-row weight blocks a
# CTA streams) on an H100: same-binary A/B of 192 KB (unset) against 384 / 768 KB (FUSEDMOE_STREAM_CTA_KB), interleaved,
# at the few-rows range's points (Qwen3-30B-A3B 256 / 1024 tokens, DeepSeek-V3 TP8 256 / 1024 / 2048, Mixtral-8x7B
# 64 / 256; bf16, fp8-tensor, fp8-block). `bash bench/results/2026-11-27-h100-stream-cta-bytes/run.sh` on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/cta; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
timeout 60 $B/fusedmoe_gpu_tests --gtest_filter='*StreamGemm*' > $R/tests.log 2>&1; echo "stream tests rc=$? $(( $(date +%s)-t0 ))s"
grep -E "PASSED|FAILED  \]" $R/tests.log | tail -3
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
timeout 330 $AB --out $R/ab --variant kb192: --variant kb384:FUSEDMOE_STREAM_CTA_KB=384 --variant kb768:FUSEDMOE_STREAM_CTA_KB=768 \
  --order kb192,kb384,kb768,kb192,kb384,kb768 --base kb192 -- \
  --preset qwen3-30b-a3b-tp1,deepseek-v3-tp8,mixtral-8x7b --m 64,256,1024,2048 --formats bf16,fp8-tensor,fp8-block \
  --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 0.25 > $R/ab.log 2>&1
echo "ab rc=$? $(( $(date +%s)-t0 ))s"; sed -n '/| preset/,$p' $R/ab.log
python3 - $R > $R/ab_stages.txt <<'PY'
import json, os, sys
d = os.path.join(sys.argv[1], "ab")
for run in sorted(os.listdir(d)):
    f = os.path.join(d, run, "fusedmoe-bench.json")
    if not os.path.exists(f): continue
    for p in json.load(open(f))["points"]:
        s = p.get("stages") or {}
        print(run, p["preset"], p["format"], p["M"], p.get("status"), "total %.1f" % (1e3 * (p.get("median_ms") or 0)),
              " ".join("%s %.1f" % (k[:-3], 1e3 * s[k]) for k in ("permute_ms", "gemm1_ms", "activation_ms", "gemm2_ms", "finalize_ms") if k in s))
PY
find $R -name "*.npy" -delete; find $R -type d -name routing | xargs -r rm -rf
echo "done $(( $(date +%s)-t0 ))s"
