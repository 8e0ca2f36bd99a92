set -u
# Whether the stream GEMM's tall token tile pays for shorter rows when each CTA streams more weight blocks: same-binary
# A/B on an H100 of the kept rule (auto: rows >= 12 KB) against rows >= 4 KB (FUSEDMOE_STREAM_TALL=4096: also DeepSeek-V3
# TP1's fp8 GEMM1, Mixtral's GEMM1s at 512 tokens) with 192 KB and with 1536 KB of weights per CTA (FUSEDMOE_STREAM_CTA_KB).
# `bash bench/results/2026-11-27-h100-tall-long-cta/run.sh` from the repository root on the device.
mkdir -p .devcarry && tar xf .devcarry/pack/bins.tgz -C .devcarry
t0=$(date +%s); B=$PWD/.devcarry/bin; R=$OUT/tlc; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv > $R/device.txt; cat $B/sha >> $R/device.txt; date -u >> $R/device.txt
AB="python3 bench/ab.py run --bench $B/fusedmoe-bench"
timeout 300 $AB --out $R/ab --variant auto: --variant t4k:FUSEDMOE_STREAM_TALL=4096 --variant t4kc:FUSEDMOE_STREAM_TALL=4096,FUSEDMOE_STREAM_CTA_KB=1536 \
  --order auto,t4k,t4kc,auto,t4k,t4kc --base auto -- \
  --preset deepseek-v3-tp1,mixtral-8x7b --m 512,4096 --formats bf16,fp8-tensor,fp8-channel \
  --check-tokens 2 --no-ceilings --stage-runs 1 --max-minutes 0.3 > $R/ab.log 2>&1
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
